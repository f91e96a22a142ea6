#include "cutecall/bundle.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "bundle_manifest.h"
#include "bundle_runtime.h"
#include "module_registry.h"
#include "load_stats.h"

namespace cutecall {
namespace {

using bundle_internal::ManifestEntry;

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

// $CUTECALL_BUNDLE_EAGER set to anything but "" or "0".
bool EagerFromEnvironment() {
  const char* v = std::getenv("CUTECALL_BUNDLE_EAGER");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
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

// Where a kernel's object is, and the lock its first load takes.
struct BundleKernel::Source {
  std::string bundle_path;
  std::string who;  // "cutecall: bundle '<path>': entry '<name>': "
  bundle_internal::ManifestEntry entry;  // name, function, sha256, size
  std::mutex mu;
  std::shared_ptr<LoadedModule> module;  // under mu; module_ points into it
};

BundleKernel::BundleKernel(std::string name, std::string arch, LaunchPlan plan)
    : name_(std::move(name)), arch_(std::move(arch)), plan_(std::move(plan)) {}

BundleKernel::~BundleKernel() = default;

ErrorOr<std::unique_ptr<Bundle>> Bundle::Open(const std::string& path,
                                              const BundleOptions& options) {
  static std::atomic<uint64_t> next_id{1};
  const bool eager = options.load_modules &&
                     (options.eager_load || EagerFromEnvironment());
  // Lazy: the manifest and the files' sizes now, each object at its load.
  // Eager: every object verified first; modules load only once all pass.
  bundle_internal::VerifiedBundle v;
  if (eager) {
    ErrorOr<bundle_internal::VerifiedBundle> read =
        bundle_internal::ReadVerifiedBundle(path, options);
    if (!read.ok()) return read.status();
    v = std::move(read).value();
  } else {
    ErrorOr<bundle_internal::CheckedManifest> read =
        bundle_internal::ReadCheckedManifest(path, options);
    if (!read.ok()) return read.status();
    v.manifest = std::move(read->manifest);
    v.plans = std::move(read->plans);
  }
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
    const load_stats::Stopwatch watch;
    ErrorOr<std::string> lib = bundle_internal::ChooseRuntime(v.manifest, who);
    if (!lib.ok()) return lib.status();
    bundle->runtime_library_ = RuntimeLibraryPath();
    load_stats::Record(load_stats::Event::kRuntimeChoose, watch.Ms());
    // The runtime library loads here (once per process): a library that
    // cannot load is Open's error. Modules wait for their first Run.
    ErrorOr<const RuntimeTable*> rt = Runtime();
    if (!rt.ok()) return Status(rt.status().code(), who + rt.status().message());
  }
  for (size_t i = 0; i < v.manifest.entries.size(); ++i) {
    ManifestEntry& e = v.manifest.entries[i];
    auto k = std::unique_ptr<BundleKernel>(
        new BundleKernel(e.name, e.arch, std::move(v.plans[i])));
    k->scalar_types_ = std::move(e.scalar_types);
    k->scalar_names_ = std::move(e.scalar_names);
    k->key_ = std::move(e.key);
    k->device_reads_ = std::move(e.device_reads);
    k->layouts_ = std::move(e.layouts);
    if (options.load_modules) {
      k->source_ = std::make_unique<BundleKernel::Source>();
      BundleKernel::Source& src = *k->source_;
      src.bundle_path = path;
      src.who = who + "entry '" + e.name + "': ";
      src.entry.name = e.name;
      src.entry.function = e.function;
      src.entry.sha256 = e.sha256;
      src.entry.size = e.size;
    }
    if (eager) {
      std::lock_guard<std::mutex> lock(k->source_->mu);
      if (Status s = k->LoadFrom(v.objects[i]); !s.ok()) return s;
    }
    bundle->kernels_.push_back(std::move(k));
  }
  std::sort(bundle->kernels_.begin(), bundle->kernels_.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  return bundle;
}

// Holds source_->mu; `bytes` verified against the entry's digest.
Status BundleKernel::LoadFrom(std::string_view bytes) const {
  Source& src = *source_;
  ErrorOr<std::shared_ptr<LoadedModule>> module = ModuleRegistry::Global().Acquire(
      src.entry.sha256, bytes, src.entry.function, name_);
  if (!module.ok()) {
    return Status(module.status().code(), src.who + module.status().message());
  }
  src.module = std::move(module).value();
  module_.store(src.module.get(), std::memory_order_release);
  return Status::Ok();
}

Status BundleKernel::Load() const {
  if (loaded()) return Status::Ok();
  if (source_ == nullptr) {
    return FailedPrecondition("cutecall: kernel '" + name_ + "': its bundle "
                              "was opened with load_modules = false");
  }
  Source& src = *source_;
  std::lock_guard<std::mutex> lock(src.mu);
  if (loaded()) return Status::Ok();  // another thread loaded it meanwhile
  // Loaded already (another bundle, the same bytes): no read, no hash.
  if (auto live = ModuleRegistry::Global().FindLive(src.entry.sha256,
                                                    src.entry.function)) {
    src.module = std::move(live);
    module_.store(src.module.get(), std::memory_order_release);
    return Status::Ok();
  }
  ErrorOr<std::string> bytes =
      bundle_internal::ReadVerifiedObject(src.bundle_path, src.entry, src.who);
  if (!bytes.ok()) return bytes.status();
  return LoadFrom(bytes.value());
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
  const LoadedModule* module = module_.load(std::memory_order_acquire);
  if (module == nullptr) {  // the first Run: load it (once) now
    if (Status s = Load(); !s.ok()) return s;
    module = module_.load(std::memory_order_acquire);
  }
  return module->Run(stream, slots, plan_.num_slots(), name_);
}

}  // namespace cutecall
