#include "bundle_runtime.h"

#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string_view>

#include "cutecall/runtime_table.h"
#include "sha256.h"

namespace cutecall::bundle_internal {
namespace {

std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  return out;
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}

std::string Dirname(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : p.substr(0, slash);
}

// urlsafe base64 without padding (wheel RECORD) -> lower-case hex.
bool B64ToHex(std::string_view b64, std::string* hex) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-' || c == '+') return 62;
    if (c == '_' || c == '/') return 63;
    return -1;
  };
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : b64) {
    if (c == '=') break;
    int v = value(c);
    if (v < 0) return false;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(char((acc >> bits) & 0xFF));
    }
  }
  if (bytes.size() != 32) return false;
  Digest d;
  for (size_t i = 0; i < 32; ++i) d[i] = uint8_t(bytes[i]);
  *hex = ToHex(d);
  return true;
}

// The identity RECORD gives `real` (a resolved path), if a cutlass-dsl
// wheel's RECORD in a directory above it lists it with its size.
bool FromRecord(const std::string& real, off_t size, RuntimeIdentity* out) {
  std::string dir = Dirname(real);
  for (int up = 0; up < 6 && dir != "/"; ++up, dir = Dirname(dir)) {
    for (const std::string& info : Glob(dir + "/nvidia_cutlass_dsl*.dist-info")) {
      std::ifstream in(info + "/RECORD");
      const std::string rel = real.substr(dir.size() + 1) + ",sha256=";
      for (std::string line; std::getline(in, line);) {
        // pip writes RECORD with the csv module: lines end in "\r\n".
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.compare(0, rel.size(), rel) != 0) continue;
        const size_t comma = line.find(',', rel.size());
        if (comma == std::string::npos ||
            line.substr(comma + 1) != std::to_string(size) ||
            !B64ToHex(std::string_view(line).substr(rel.size(),
                                                    comma - rel.size()),
                      &out->sha256)) {
          return false;
        }
        // ".../nvidia_cutlass_dsl_libs_cu13-4.8.1.dist-info"
        std::string base = info.substr(dir.size() + 1);
        base = base.substr(0, base.size() - std::string(".dist-info").size());
        const size_t dash = base.find('-');
        std::string name = base.substr(0, dash);
        for (char& c : name) c = c == '_' ? '-' : c;
        out->version = dash == std::string::npos
                           ? name
                           : name + "==" + base.substr(dash + 1);
        return true;
      }
    }
  }
  return false;
}

std::string Short(const std::string& hex) { return hex.substr(0, 12); }

std::string Describe(const RuntimeIdentity& id, const std::string& path) {
  return id.version + " (sha256 " + Short(id.sha256) + "...) at '" + path + "'";
}

}  // namespace

ErrorOr<RuntimeIdentity> IdentifyRuntime(const std::string& path) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, RuntimeIdentity>();
  const std::string real = RealPath(path);
  struct stat st;
  if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return NotFound("no file '" + path + "'");
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(real); it != cache->end()) return it->second;
  }
  RuntimeIdentity id;
  if (!FromRecord(real, st.st_size, &id)) {
    std::ifstream in(real, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    id.sha256 = ToHex(Sha256(bytes));
    id.version = "unknown";
  }
  std::lock_guard<std::mutex> lock(mu);
  (*cache)[real] = id;
  return id;
}

std::vector<std::string> PythonRuntimeCandidates() {
  std::vector<std::string> prefixes;
  auto add_prefix = [&](const std::string& p) {
    for (const std::string& q : prefixes) {
      if (q == p) return;
    }
    prefixes.push_back(p);
  };
  const char* path_env = std::getenv("PATH");
  std::string_view rest = path_env ? path_env : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    const std::string py = (dir.empty() ? "." : dir) + "/python3";
    if (::access(py.c_str(), X_OK) != 0) continue;
    add_prefix(Dirname(dir.empty() ? "." : dir));  // a venv: <venv>/bin
    add_prefix(Dirname(Dirname(RealPath(py))));    // the interpreter's own
  }
  if (const char* home = std::getenv("HOME")) add_prefix(std::string(home) + "/.local");
  std::vector<std::string> out;
  for (const char* flavour : {"cu13", "cu12"}) {
    for (const std::string& prefix : prefixes) {
      for (const char* sub : {"/lib/python3*/site-packages", "/lib/python3*/dist-packages",
                              "/local/lib/python3*/dist-packages"}) {
        for (const std::string& lib :
             Glob(prefix + sub + "/nvidia_cutlass_dsl/" + flavour +
                  "/lib/libcute_dsl_runtime.so")) {
          out.push_back(lib);
        }
      }
    }
  }
  return out;
}

ErrorOr<std::string> ChooseRuntime(const Manifest& m, const std::string& who) {
  const std::string configured = RuntimeLibraryPath();
  const bool recorded = !m.runtime_sha256.empty();
  const std::string want = m.runtime_version + " (sha256 " +
                           Short(m.runtime_sha256) + "...)";
  auto mismatch = [&](const RuntimeIdentity& id, const std::string& path,
                      const std::string& how) {
    return FailedPrecondition(
        who + "its objects need the CuTe DSL runtime " + want + ", but " +
        how + " is " + Describe(id, path) + "; set CUTECALL_DSL_RUNTIME to a "
        "matching libcute_dsl_runtime.so or install " + m.runtime_version);
  };
  if (!configured.empty()) {
    if (!recorded) return configured;
    ErrorOr<RuntimeIdentity> id = IdentifyRuntime(configured);
    if (!id.ok()) {
      if (RuntimeLoaded()) return configured;  // loaded, then moved away
      return FailedPrecondition(who + "the CuTe DSL runtime '" + configured +
                                "' (CUTECALL_DSL_RUNTIME or "
                                "SetRuntimeLibraryPath) does not exist");
    }
    if (id->sha256 != m.runtime_sha256) {
      return mismatch(*id, configured,
                      RuntimeLoaded() ? "the runtime this process loaded"
                                      : "the configured runtime "
                                        "(CUTECALL_DSL_RUNTIME or "
                                        "SetRuntimeLibraryPath)");
    }
    return configured;
  }
  std::vector<std::string> candidates;
  if (recorded) candidates.push_back(m.runtime_path);
  for (std::string& c : PythonRuntimeCandidates()) candidates.push_back(std::move(c));
  std::string found;
  for (const std::string& c : candidates) {
    ErrorOr<RuntimeIdentity> id = IdentifyRuntime(c);
    if (!id.ok()) continue;
    if (!recorded || id->sha256 == m.runtime_sha256) {
      SetRuntimeLibraryPath(c);
      return c;
    }
    found += "; " + Describe(*id, c);
  }
  if (!recorded) return std::string();
  return FailedPrecondition(
      who + "no CuTe DSL runtime matching " + want + " was found (recorded "
      "path '" + m.runtime_path + "', then the nvidia-cutlass-dsl libs of "
      "python3 on PATH" + (found.empty() ? "; none found" : "; found" + found.substr(1)) +
      "). Set CUTECALL_DSL_RUNTIME or install " + m.runtime_version);
}

}  // namespace cutecall::bundle_internal
