#include "module_registry.h"

#include <exception>

#include "device_context.h"
#include "launch_blocking.h"
#include "launch_record.h"
#include "load_stats.h"

namespace cutecall {
namespace {

// The outcome of one module_create_from_bytes call.
struct Created {
  int rc = 0;
  bool raised = false;  // the runtime threw
  void* module = nullptr;
  bool ok() const { return !raised && rc == 0 && module != nullptr; }
};

// Loads `bytes`, linked against the shared library `library` unless null.
Created CreateModule(const RuntimeTable& rt, std::string_view bytes,
                     const char* library) {
  Created c;
  const char* libs[1] = {library};
  try {
    c.rc = rt.module_create_from_bytes(
        &c.module, reinterpret_cast<const unsigned char*>(bytes.data()),
        bytes.size(), library != nullptr ? libs : nullptr,
        library != nullptr ? 1 : 0);
  } catch (...) {
    c.raised = true;
  }
  return c;
}

}  // namespace

LoadedModule::LoadedModule(const RuntimeTable* rt, void* module,
                           void* function, Digest key, std::string prefix,
                           std::string kernel_name,
                           std::string launch_unrouted)
    : rt_(rt),
      module_(module),
      function_(function),
      key_(key),
      prefix_(std::move(prefix)),
      kernel_name_(std::move(kernel_name)),
      launch_unrouted_(std::move(launch_unrouted)) {}

LoadedModule::~LoadedModule() {
  try {
    rt_->module_destroy(module_);
  } catch (...) {  // never let the runtime's exceptions escape a destructor
  }
}

Status LoadedModule::Run(void* stream, abi::Slot* slots, size_t num_slots,
                         const std::string& kernel) const {
  if (num_slots > abi::kMaxSlots) {
    return InvalidArgument("cutecall: kernel '" + kernel + "': " +
                           std::to_string(num_slots) + " slots exceed " +
                           std::to_string(abi::kMaxSlots));
  }
  void* packed[abi::kMaxSlots + 2];
  int32_t cuda_status = 0;
  packed[0] = &stream;
  for (size_t i = 0; i < num_slots; ++i) packed[i + 1] = &slots[i];
  packed[num_slots + 1] = &cuda_status;
  // Only a routed module's launches reach the record (modules load
  // unrouted by default): the hot path of the others skips it.
  if (launch_unrouted_.empty()) ResetLaunchRecord();
  int rc;
  try {
    rc = rt_->function_run(function_, packed, num_slots + 2);
  } catch (const std::exception& e) {
    return Internal("cutecall: kernel '" + kernel +
                    "': the CuTe DSL runtime raised: " + e.what());
  } catch (...) {
    return Internal("cutecall: kernel '" + kernel +
                    "': the CuTe DSL runtime raised an unknown exception");
  }
  if (cuda_status != 0) {
    return Internal("cutecall: kernel '" + kernel +
                    "' failed to launch: " + CudaErrorText(cuda_status) +
                    "; launch: " + DescribeLastLaunch());
  }
  if (rc != 0) {
    return Internal("cutecall: kernel '" + kernel +
                    "' failed in the CuTe DSL runtime: " +
                    RuntimeErrorText(*rt_, rc));
  }
  if (LaunchBlocking()) {
    return SyncAfterLaunch(stream, kernel,
                           [this] { return DescribeLastLaunch(); });
  }
  return Status::Ok();
}

std::string LoadedModule::DescribeLastLaunch() const {
  if (!launch_unrouted_.empty()) {
    return "grid and block unknown (" + launch_unrouted_ + ")";
  }
  return DescribeLaunch(CurrentLaunchRecord());
}

ModuleRegistry& ModuleRegistry::Global() {
  static ModuleRegistry* registry = new ModuleRegistry();  // lives to exit
  return *registry;
}

ErrorOr<std::shared_ptr<LoadedModule>> ModuleRegistry::Acquire(
    const Digest& key, std::string_view bytes, const std::string& prefix,
    const std::string& kernel_name) {
  const std::string who = "cutecall: kernel '" + kernel_name + "': ";
  if (bytes.empty()) return InvalidArgument(who + "module bytes are empty");
  if (Sha256(bytes) != key) {
    return InvalidArgument(who + "module digest does not match its key " +
                           ToHex(key) + " (corrupt or tampered object)");
  }
  if (Status s = CheckElfDefines(bytes, prefix + "_version"); !s.ok()) {
    return Status(s.code(), who + s.message() +
                                " (wrong function prefix or not a CuTe DSL "
                                "object)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto slot_key = std::make_pair(key, prefix);
  auto it = modules_.find(slot_key);
  if (it != modules_.end()) {
    if (auto live = it->second.lock()) {
      load_stats::Record(load_stats::Event::kModuleShared, 0);
      return live;
    }
  }
  ErrorOr<const RuntimeTable*> rt_or = Runtime();
  if (!rt_or.ok()) {
    return Status(rt_or.status().code(), who + rt_or.status().message());
  }
  const RuntimeTable* rt = rt_or.value();
  // Routed where possible; as compiled otherwise, or if the routed load
  // fails. (An import the runtime cannot resolve would not fail here but
  // abort the process in module_get_function: RouteLaunches names only a
  // library checked to resolve both shims.)
  const load_stats::Stopwatch watch;  // the create, for BundleLoadStats
  DriverLaunchKernelExFn driver_launch = nullptr;
  if (ErrorOr<const DriverTable*> d = Driver(); d.ok()) {
    driver_launch = d.value()->launch_kernel_ex;
  }
  LaunchRoute route = RouteLaunches(bytes, *rt, driver_launch != nullptr);
  Created created;
  if (route.routed()) {
    SetLaunchForward(rt->launch_kernel_ex);
    if (route.shim == kLaunchDriverShim) SetLaunchDriver(driver_launch);
    created = CreateModule(*rt, route.bytes, route.library.c_str());
    if (!created.ok()) {
      route.why_not = "loading the module with its launches routed through " +
                      std::string(route.shim) + " in '" + route.library +
                      "' failed: " +
                      (created.raised ? std::string("the runtime raised")
                                      : RuntimeErrorText(*rt, created.rc));
    }
  }
  if (!route.routed()) {
    created = CreateModule(*rt, bytes, nullptr);
    if (created.raised) {
      return Internal(who + "the CuTe DSL runtime raised while loading");
    }
    if (!created.ok()) {
      return Internal(who + "cannot load module: " +
                      RuntimeErrorText(*rt, created.rc));
    }
  }
  void* module = created.module;
  void* function = nullptr;
  int rc = 0;
  bool raised = false;
  try {
    rc = rt->module_get_function(&function, module, prefix.c_str());
  } catch (...) {
    raised = true;
  }
  if (raised || rc != 0 || function == nullptr) {
    std::string text = raised ? std::string("the runtime raised")
                              : RuntimeErrorText(*rt, rc);
    try {
      rt->module_destroy(module);
    } catch (...) {
    }
    return Internal(who + "cannot get function '" + prefix + "': " + text);
  }
  load_stats::Record(load_stats::Event::kModuleCreate, watch.Ms());
  auto loaded = std::make_shared<LoadedModule>(
      rt, module, function, key, prefix, kernel_name, route.why_not);
  modules_[slot_key] = loaded;
  ++total_loads_;
  return loaded;
}

std::shared_ptr<LoadedModule> ModuleRegistry::FindLive(
    const Digest& key, const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = modules_.find(std::make_pair(key, prefix));
  std::shared_ptr<LoadedModule> live =
      it != modules_.end() ? it->second.lock() : nullptr;
  if (live) load_stats::Record(load_stats::Event::kModuleShared, 0);
  return live;
}

size_t ModuleRegistry::live_modules() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [k, w] : modules_) n += w.expired() ? 0 : 1;
  return n;
}

size_t ModuleRegistry::total_loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_loads_;
}

}  // namespace cutecall
