#include "bundle_manifest.h"

#include <cctype>
#include <charconv>
#include <map>
#include <set>

#include "cutecall/abi.h"
#include "cutecall/bundle.h"

namespace cutecall::bundle_internal {
namespace {

constexpr std::string_view kDigestField = "manifest-sha256";
const char* const kEntryFields[] = {
    "kernel", "key", "arch", "function", "sha256", "size", "plan-version",
    "plan", "operands", "symbols", "num-slots", "scalars", "layouts"};

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  if (s.empty()) return out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

bool ValidName(std::string_view n) {
  if (n.empty() || n.size() > 128 || n[0] == '.' || n[0] == '-') return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
          c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

bool ValidArch(std::string_view a) {
  if (a.size() < 5 || a.substr(0, 3) != "sm_") return false;
  size_t digits = 0;
  while (3 + digits < a.size() && std::isdigit(static_cast<unsigned char>(
                                      a[3 + digits]))) {
    ++digits;
  }
  std::string_view rest = a.substr(3 + digits);
  return digits >= 2 && (rest.empty() || rest == "a" || rest == "f");
}

// Checks one entry's raw fields and fills `e`. Errors are relative to the
// entry ("field 'x' ...").
Status FillEntry(const std::map<std::string, std::string_view>& f,
                 ManifestEntry* e) {
  auto bad = [](const std::string& field, const std::string& what) {
    return InvalidArgument("field '" + field + "' " + what);
  };
  e->kernel = std::string(f.at("kernel"));
  e->key = std::string(f.at("key"));
  e->arch = std::string(f.at("arch"));
  e->function = std::string(f.at("function"));
  e->operands = std::string(f.at("operands"));
  e->symbols = std::string(f.at("symbols"));
  if (auto jax = f.find("jax"); jax != f.end()) e->jax = std::string(jax->second);
  if (auto reads = f.find("device-reads"); reads != f.end()) {
    if (Status s = ParseDeviceReads(reads->second, &e->device_reads); !s.ok()) {
      return s;
    }
  }
  Digest unused;
  if (!FromHex(e->key, &unused)) return bad("key", "must be 64 hex characters");
  if (!FromHex(f.at("sha256"), &e->sha256)) {
    return bad("sha256", "must be 64 hex characters");
  }
  if (!ValidArch(e->arch)) {
    return bad("arch", "must look like sm_90a, got '" + e->arch + "'");
  }
  if (e->kernel.empty()) return bad("kernel", "is empty");
  if (e->function.empty()) return bad("function", "is empty");
  int64_t size, slots, version;
  if (!ParseInt(f.at("size"), &size) || size <= 0) {
    return bad("size", "must be a positive integer");
  }
  if (!ParseInt(f.at("num-slots"), &slots) || slots < 0) {
    return bad("num-slots", "must be a non-negative integer");
  }
  e->size = size_t(size);
  e->num_slots = size_t(slots);
  if (!ParseInt(f.at("plan-version"), &version)) {
    return bad("plan-version", "must be an integer");
  }
  if (version < abi::kOldestPlanVersion || version > abi::kPlanVersion) {
    return bad("plan-version",
               "is " + std::to_string(version) + "; this cutecall reads plan "
               "versions " + std::to_string(abi::kOldestPlanVersion) + ".." +
                   std::to_string(abi::kPlanVersion));
  }
  for (std::string_view v : Split(f.at("plan"), ' ')) {
    int64_t x;
    if (!ParseInt(v, &x)) return bad("plan", "holds a non-integer");
    e->plan.push_back(x);
  }
  if (e->plan.size() < abi::kHeaderSize || e->plan[0] != version) {
    return bad("plan", "must start with its version " + std::to_string(version));
  }
  // "<Type>:<name>" per scalar, or "?" where neither was recorded.
  for (std::string_view s : Split(f.at("scalars"), ',')) {
    const size_t colon = s.find(':');
    std::string type(s.substr(0, colon));
    std::string name(colon == std::string_view::npos ? std::string_view()
                                                     : s.substr(colon + 1));
    abi::ScalarType code;
    if (type == "?" ? colon != std::string_view::npos
                    : !abi::ScalarTypeFromName(type, &code)) {
      return bad("scalars", "has an unknown type '" + type + "'");
    }
    e->scalar_types.push_back(type);
    e->scalar_names.push_back(name);
  }
  if (int64_t(e->scalar_types.size()) != e->plan[4]) {
    return bad("scalars", "lists " + std::to_string(e->scalar_types.size()) +
                              " scalars, the plan has " +
                              std::to_string(e->plan[4]));
  }
  std::string_view layouts = f.at("layouts");
  if (layouts != "-") {
    for (std::string_view op : Split(layouts, ';')) {
      std::vector<int32_t> dims;
      for (std::string_view d : Split(op, ',')) {
        int64_t x;
        if (!ParseInt(d, &x) || x < 0 || x >= abi::kMaxRank) {
          return bad("layouts", "holds a bad dim '" + std::string(d) + "'");
        }
        dims.push_back(int32_t(x));
      }
      e->layouts.push_back(std::move(dims));
    }
    if (int64_t(e->layouts.size()) != e->plan[3]) {
      return bad("layouts", "must list one layout per plan operand (" +
                                std::to_string(e->plan[3]) + ")");
    }
  }
  return Status::Ok();
}

// "dsl-runtime <sha256 hex> <version> <path>": the path is the rest of the
// line (it may hold spaces); the version is one word.
Status ParseRuntimeField(std::string_view v, Manifest* m) {
  const size_t a = v.find(' ');
  const size_t b = a == std::string_view::npos ? a : v.find(' ', a + 1);
  Digest unused;
  if (b == std::string_view::npos || !FromHex(v.substr(0, a), &unused) ||
      b == a + 1 || b + 1 >= v.size()) {
    return InvalidArgument("field 'dsl-runtime' must be '<sha256 hex> "
                           "<version> <path>', got '" +
                           std::string(v.substr(0, 120)) + "'");
  }
  m->runtime_sha256 = std::string(v.substr(0, a));
  m->runtime_version = std::string(v.substr(a + 1, b - a - 1));
  m->runtime_path = std::string(v.substr(b + 1));
  return Status::Ok();
}

bool IsPermutation(const std::vector<int32_t>& dims, int32_t rank) {
  std::vector<bool> seen(size_t(rank), false);
  if (int32_t(dims.size()) != rank) return false;
  for (int32_t d : dims) {
    if (d < 0 || d >= rank || seen[size_t(d)]) return false;
    seen[size_t(d)] = true;
  }
  return true;
}

}  // namespace

ErrorOr<LaunchPlan> ParseEntryPlan(const ManifestEntry& e) {
  // Errors at run time name the exported name, the one callers look up.
  ErrorOr<LaunchPlan> plan = LaunchPlan::Parse(
      e.plan.data(), e.plan.size(), e.name, e.operands, e.symbols);
  if (!plan.ok()) {
    return InvalidArgument("field 'plan': " + plan.status().message());
  }
  if (plan->num_slots() != e.num_slots) {
    return InvalidArgument("field 'num-slots' is " +
                           std::to_string(e.num_slots) + ", the plan has " +
                           std::to_string(plan->num_slots()));
  }
  for (size_t i = 0; i < e.layouts.size(); ++i) {
    if (!IsPermutation(e.layouts[i], plan->operands()[i].rank)) {
      return InvalidArgument("field 'layouts': operand " + std::to_string(i) +
                             " has no valid layout for its rank " +
                             std::to_string(plan->operands()[i].rank));
    }
  }
  return plan;
}

ErrorOr<Manifest> ParseManifest(std::string_view text,
                                const std::string& where) {
  const std::string file = where + std::string(kBundleManifest) + ": ";
  auto fail = [&](const std::string& m) { return InvalidArgument(file + m); };
  if (text.empty() || text.back() != '\n' ||
      text.find('\r') != std::string_view::npos) {
    return fail("truncated or not a cutecall manifest (no final line break, "
                "or CR characters)");
  }
  std::vector<std::string_view> lines = Split(text.substr(0, text.size() - 1),
                                              '\n');
  if (lines.empty()) return fail("empty");
  std::string_view last = lines.back();
  Manifest m;
  Digest stated;
  if (last.substr(0, kDigestField.size() + 1) !=
          std::string(kDigestField) + " " ||
      !FromHex(last.substr(kDigestField.size() + 1), &stated)) {
    return fail("last line must be 'manifest-sha256 <64 hex>' (truncated?)");
  }
  std::string_view body = text.substr(0, text.size() - last.size() - 1);
  m.digest = ToHex(stated);
  if (Sha256(body) != stated) {
    return fail("field 'manifest-sha256' is " + m.digest +
                " but the manifest's SHA-256 is " + ToHex(Sha256(body)) +
                " (tampered or corrupt)");
  }
  int format = 0;
  for (int v = kOldestBundleFormatVersion; v <= kBundleFormatVersion; ++v) {
    if (lines[0] == "cutecall-bundle " + std::to_string(v)) format = v;
  }
  if (format == 0) {
    return fail("line 1: field 'cutecall-bundle' must be " +
                std::to_string(kOldestBundleFormatVersion) + ".." +
                std::to_string(kBundleFormatVersion) + " (this cutecall reads "
                "formats " + std::to_string(kOldestBundleFormatVersion) + ".." +
                std::to_string(kBundleFormatVersion) + "), got '" +
                std::string(lines[0].substr(0, 80)) + "'");
  }
  std::map<std::string, std::string_view> header, fields;
  std::set<std::string> names;
  bool in_entry = false;
  std::string name;
  for (size_t n = 1; n + 1 < lines.size(); ++n) {
    std::string_view line = lines[n];
    size_t sp = line.find(' ');
    std::string field(line.substr(0, sp));
    std::string_view value =
        sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    std::string at = "line " + std::to_string(n + 1) + ": ";
    if (in_entry) at += "entry '" + name + "': ";
    bool entry_field = field == "jax" || (format >= 3 && field == "device-reads");
    for (const char* f : kEntryFields) entry_field = entry_field || field == f;
    const bool header_field = field == "cutecall" || field == "dsl" ||
                              (format >= 2 && field == "dsl-runtime");
    if (!in_entry && header_field && !header.count(field)) {
      header[field] = value;
    } else if (!in_entry && field == "entry") {
      name = std::string(value);
      if (!ValidName(name) || !names.insert(name).second) {
        return fail(at + "bad or repeated entry name '" + name + "'");
      }
      in_entry = true;
      fields.clear();
    } else if (in_entry && field == "end") {
      std::string missing;
      for (const char* f : kEntryFields) {
        if (!fields.count(f)) missing += (missing.empty() ? "" : ", ") +
                                         std::string(f);
      }
      if (!missing.empty()) return fail(at + "missing field(s) " + missing);
      ManifestEntry e;
      e.name = name;
      if (Status s = FillEntry(fields, &e); !s.ok()) {
        return fail("entry '" + name + "': " + s.message());
      }
      m.entries.push_back(std::move(e));
      in_entry = false;
    } else if (in_entry && entry_field && !fields.count(field)) {
      fields[field] = value;
    } else {
      return fail(at + "unexpected or repeated field '" + field + "'");
    }
  }
  if (in_entry) return fail("entry '" + name + "' has no 'end' line");
  if (!header.count("cutecall") || !header.count("dsl")) {
    return fail("missing header field 'cutecall' or 'dsl'");
  }
  if (m.entries.empty()) return fail("no entries");
  m.cutecall_version = std::string(header["cutecall"]);
  m.dsl_version = std::string(header["dsl"]);
  if (auto rt = header.find("dsl-runtime"); rt != header.end()) {
    if (Status s = ParseRuntimeField(rt->second, &m); !s.ok()) {
      return fail(s.message());
    }
  }
  return m;
}

}  // namespace cutecall::bundle_internal
