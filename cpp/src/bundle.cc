#include "cutecall/bundle.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iterator>
#include <utility>

#include "bundle_manifest.h"
#include "bundle_runtime.h"
#include "cutecall/module_registry.h"

namespace cutecall {
namespace {

using bundle_internal::ManifestEntry;

// Reads the file at `path` whole. Refuses files other users may write:
// these bytes become machine code.
Status ReadWhole(const std::string& path, const std::string& shown,
                 const std::string& who, std::string* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return NotFound(who + "missing file '" + shown + "'");
  }
  if (st.st_mode & S_IWOTH) {
    return FailedPrecondition(who + "'" + shown + "' is writable by other "
                              "users; refusing to load machine code from it");
  }
  std::ifstream in(path, std::ios::binary);
  out->assign(std::istreambuf_iterator<char>(in), {});
  if (!in.good() && !in.eof()) {
    return FailedPrecondition(who + "cannot read '" + shown + "'");
  }
  return Status::Ok();
}

// "sm_90a" -> major "9", minor 0, suffix 'a'; false if it is not an arch.
// The major is its digits without leading zeros, compared as text: no
// number of digits overflows.
bool ParseArch(std::string_view a, std::string_view* major, int* minor,
               char* suffix) {
  if (a.substr(0, 3) != "sm_") return false;
  size_t n = 3;
  while (n < a.size() && a[n] >= '0' && a[n] <= '9') ++n;
  if (n < 5 || n + 1 < a.size()) return false;
  std::string_view digits = a.substr(3, n - 4);
  while (digits.size() > 1 && digits[0] == '0') digits.remove_prefix(1);
  *major = digits;
  *minor = a[n - 1] - '0';
  *suffix = n < a.size() ? a[n] : '\0';
  return true;
}

}  // namespace

abi::Slot ScalarF32(float v) {
  abi::Slot s;
  s.bits = 0;
  s.f32 = v;
  return s;
}
abi::Slot ScalarF64(double v) {
  abi::Slot s;
  s.f64 = v;
  return s;
}
abi::Slot ScalarI32(int32_t v) { return ScalarI64(v); }
abi::Slot ScalarI64(int64_t v) {
  abi::Slot s;
  s.i64 = v;
  return s;
}
abi::Slot ScalarBool(bool v) { return ScalarI64(v ? 1 : 0); }

bool ArchRunsOn(std::string_view arch, std::string_view device_arch) {
  std::string_view major, dmajor;
  int minor, dminor;
  char suffix, dsuffix;
  if (!ParseArch(arch, &major, &minor, &suffix) ||
      !ParseArch(device_arch, &dmajor, &dminor, &dsuffix)) {
    return false;
  }
  if (suffix == 'a') return major == dmajor && minor == dminor;
  return major == dmajor && dminor >= minor;
}

namespace bundle_internal {

ErrorOr<VerifiedBundle> ReadVerifiedBundle(const std::string& path,
                                           const BundleOptions& options) {
  const std::string who = "cutecall: bundle '" + path + "': ";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFound(who + "no such directory");
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(who + "not a directory");
  if (st.st_mode & S_IWOTH) {
    return FailedPrecondition(who + "the directory is writable by other users;"
                              " refusing to load machine code from it");
  }
  std::string text;
  if (Status s = ReadWhole(path + "/" + kBundleManifest, kBundleManifest, who,
                           &text);
      !s.ok()) {
    return s;
  }
  ErrorOr<Manifest> m = ParseManifest(text, who);
  if (!m.ok()) return m.status();
  if (!options.expected_digest.empty() &&
      options.expected_digest != m->digest) {
    return InvalidArgument(who + "field 'manifest-sha256' is " + m->digest +
                           ", expected " + options.expected_digest);
  }
  VerifiedBundle out;
  for (const ManifestEntry& e : m->entries) {
    const std::string at = who + "entry '" + e.name + "': ";
    if (!options.device_arch.empty() && !ArchRunsOn(e.arch, options.device_arch)) {
      return FailedPrecondition(at + "field 'arch' is " + e.arch +
                                ", which does not run on this GPU (" +
                                options.device_arch + ")");
    }
    const std::string rel = "objects/" + ToHex(e.sha256) + ".o";
    std::string bytes;
    if (Status s = ReadWhole(path + "/" + rel, rel, at, &bytes); !s.ok()) {
      return s;
    }
    if (bytes.size() != e.size) {
      return InvalidArgument(at + "object '" + rel + "' has " +
                             std::to_string(bytes.size()) +
                             " bytes, field 'size' says " +
                             std::to_string(e.size) + " (truncated?)");
    }
    if (Sha256(bytes) != e.sha256) {
      return InvalidArgument(at + "object '" + rel + "' has SHA-256 " +
                             ToHex(Sha256(bytes)) + ", field 'sha256' says " +
                             ToHex(e.sha256) + " (tampered or corrupt)");
    }
    if (Status s = CheckElfDefines(bytes, e.function + "_version"); !s.ok()) {
      return Status(s.code(), at + "field 'function': " + s.message());
    }
    ErrorOr<LaunchPlan> plan = ParseEntryPlan(e);
    if (!plan.ok()) {
      return Status(plan.status().code(), at + plan.status().message());
    }
    out.plans.push_back(std::move(plan).value());
    out.objects.push_back(std::move(bytes));
  }
  out.manifest = std::move(m).value();
  return out;
}

}  // namespace bundle_internal

ErrorOr<std::unique_ptr<Bundle>> Bundle::Open(const std::string& path,
                                              const BundleOptions& options) {
  static std::atomic<uint64_t> next_id{1};
  // Verify every entry and object first; load modules only once all pass.
  ErrorOr<bundle_internal::VerifiedBundle> read =
      bundle_internal::ReadVerifiedBundle(path, options);
  if (!read.ok()) return read.status();
  bundle_internal::VerifiedBundle& v = read.value();
  const std::string who = "cutecall: bundle '" + path + "': ";
  std::unique_ptr<Bundle> bundle(new Bundle());
  bundle->path_ = path;
  bundle->id_ = next_id.fetch_add(1);
  bundle->digest_ = v.manifest.digest;
  bundle->cutecall_version_ = v.manifest.cutecall_version;
  bundle->dsl_version_ = v.manifest.dsl_version;
  bundle->runtime_ = {v.manifest.runtime_version, v.manifest.runtime_sha256,
                      v.manifest.runtime_path};
  if (options.load_modules) {
    ErrorOr<std::string> lib = bundle_internal::ChooseRuntime(v.manifest, who);
    if (!lib.ok()) return lib.status();
    bundle->runtime_library_ = RuntimeLibraryPath();
  }
  for (size_t i = 0; i < v.manifest.entries.size(); ++i) {
    const ManifestEntry& e = v.manifest.entries[i];
    auto k = std::unique_ptr<BundleKernel>(
        new BundleKernel(e.name, e.arch, std::move(v.plans[i])));
    k->scalar_types_ = e.scalar_types;
    k->scalar_names_ = e.scalar_names;
    k->key_ = e.key;
    k->layouts_ = e.layouts;
    if (options.load_modules) {
      ErrorOr<std::shared_ptr<LoadedModule>> module =
          ModuleRegistry::Global().Acquire(e.sha256, v.objects[i], e.function,
                                           e.name);
      if (!module.ok()) {
        return Status(module.status().code(), who + "entry '" + e.name +
                                                  "': " +
                                                  module.status().message());
      }
      k->module_ = std::move(module).value();
    }
    bundle->kernels_.push_back(std::move(k));
  }
  std::sort(bundle->kernels_.begin(), bundle->kernels_.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  return bundle;
}

const BundleKernel* Bundle::FindOrNull(std::string_view name) const {
  auto it = std::lower_bound(
      kernels_.begin(), kernels_.end(), name,
      [](const auto& k, std::string_view n) { return k->name() < n; });
  return it != kernels_.end() && (*it)->name() == name ? it->get() : nullptr;
}

ErrorOr<const BundleKernel*> Bundle::Find(std::string_view name) const {
  if (const BundleKernel* k = FindOrNull(name)) return k;
  std::string have;
  for (const auto& k : kernels_) have += (have.empty() ? "" : ", ") + k->name();
  return NotFound("cutecall: bundle '" + path_ + "': no kernel '" +
                  std::string(name) + "'; it has " + have);
}

std::vector<std::string> Bundle::names() const {
  std::vector<std::string> out;
  for (const auto& k : kernels_) out.push_back(k->name());
  return out;
}

Status BundleKernel::CheckCompact(size_t i, const BufferView& b) const {
  const OperandPlan& op = plan_.operands()[i];
  auto error = [&](const std::string& what) {
    return InvalidArgument("cutecall: kernel '" + name_ + "', operand '" +
                           op.name + "': " + what);
  };
  if (layouts_.empty()) {
    return error("strides given, but the bundle records no layout for this "
                 "compact operand; pass strides = nullptr");
  }
  int64_t expected = 1;
  bool beyond = false;  // the compact stride no longer fits int64
  for (int32_t d : layouts_[i]) {
    if (b.dims[d] > 1 && (beyond || b.strides[d] != expected)) {
      return error("stride of dim " + std::to_string(d) + " is " +
                   std::to_string(b.strides[d]) + ", but the kernel reads it "
                   "compact (stride " +
                   (beyond ? std::string("beyond int64")
                           : std::to_string(expected)) + ")");
    }
    if (b.dims[d] == 0) {
      expected = 0;
      beyond = false;
    } else if (!beyond) {
      beyond = __builtin_mul_overflow(expected, b.dims[d], &expected);
    }
  }
  return Status::Ok();
}

Status BundleKernel::Run(void* stream, Span<BufferView> inputs,
                         Span<BufferView> outputs,
                         Span<abi::Slot> scalars) const {
  if (inputs.size != plan_.num_args() || outputs.size != plan_.num_rets() ||
      scalars.size != plan_.num_scalars()) {
    return InvalidArgument(
        "cutecall: kernel '" + name_ + "': called with " +
        std::to_string(inputs.size) + " inputs, " +
        std::to_string(outputs.size) + " outputs and " +
        std::to_string(scalars.size) + " scalars; it takes " +
        std::to_string(plan_.num_args()) + ", " +
        std::to_string(plan_.num_rets()) + " and " +
        std::to_string(plan_.num_scalars()));
  }
  abi::Slot slots[abi::kMaxSlots];
  const auto& ops = plan_.operands();
  for (size_t i = 0; i < ops.size(); ++i) {
    const BufferView& b = ops[i].source == abi::Source::kArg
                              ? inputs[size_t(ops[i].index)]
                              : outputs[size_t(ops[i].index)];
    if (b.dims == nullptr && b.rank > 0) {
      return InvalidArgument("cutecall: kernel '" + name_ + "', operand '" +
                             ops[i].name + "': dims is null");
    }
    if (Status s = plan_.PackOperand(i, b, slots); !s.ok()) return s;
    if (b.strides != nullptr && !(ops[i].flags & abi::kFlagStrided)) {
      if (Status s = CheckCompact(i, b); !s.ok()) return s;
    }
  }
  std::copy(scalars.data, scalars.data + scalars.size,
            slots + plan_.first_scalar_slot());
  if (module_ == nullptr) {
    return FailedPrecondition("cutecall: kernel '" + name_ + "': its bundle "
                              "was opened with load_modules = false");
  }
  return module_->Run(stream, slots, plan_.num_slots(), name_);
}

}  // namespace cutecall
