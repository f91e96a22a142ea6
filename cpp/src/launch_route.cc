// launch_route.cc — routing a module's launches through cutecall_launch_kex
// or cutecall_launch_drv (launch_record.h): where the shims live,
// which one a module takes, and the module bytes with their launch import
// renamed to it.
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

#include "elf.h"
#include "launch_blocking.h"
#include "launch_record.h"

namespace cutecall {
namespace {

std::mutex g_override_mu;
const std::string* g_override = nullptr;  // guarded by g_override_mu

const std::string kShimName(kLaunchShim);

// The shared object holding cutecall_launch_kex, as the runtime's JIT will
// open it: by path, which must lead back to this very function. This check
// is what makes routing safe: the runtime resolves a module's imports
// lazily, when module_get_function first materializes it, and on a missing
// one it aborts the process (DSL 4.8.1: "JIT session error: Symbols not
// found", then an exception no caller can catch). A load that could fail
// that way must never be attempted.
ErrorOr<std::string> FindShimLibrary() {
  void* self = reinterpret_cast<void*>(&cutecall_launch_kex);
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(self, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) ==
          0 ||
      map == nullptr) {
    return NotFound("dladdr finds no loaded object holding " + kShimName);
  }
  if (map->l_name == nullptr || map->l_name[0] == '\0') {
    std::string exe = info.dli_fname != nullptr ? info.dli_fname : "";
    return NotFound(kShimName + " is in the executable" +
                    (exe.empty() ? "" : " '" + exe + "'") +
                    ", not in a shared library the CuTe DSL runtime could "
                    "load (cutecall is linked statically)");
  }
  const std::string path = map->l_name;
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) {
    const char* err = dlerror();
    return NotFound("the shared library '" + path + "' holding " + kShimName +
                    " cannot be reopened by its path: " +
                    (err != nullptr ? err : "unknown error"));
  }
  // Both shims: the JIT resolves whichever a module was renamed to.
  const std::pair<std::string, void*> shims[] = {
      {kShimName, self},
      {std::string(kLaunchDriverShim), reinterpret_cast<void*>(&cutecall_launch_drv)}};
  for (const auto& [name, mine] : shims) {
    void* found = dlsym(handle, name.c_str());
    if (found != mine) {
      dlclose(handle);
      return NotFound("'" + path + "' does not export this process's " + name +
                      " (dlsym finds " +
                      (found == nullptr ? "none" : "another definition") + ")");
    }
  }
  dlclose(handle);
  return path;
}

}  // namespace

ErrorOr<std::string> LaunchShimLibrary() {
  {
    std::lock_guard<std::mutex> lock(g_override_mu);
    if (g_override != nullptr) return *g_override;
  }
  // Where this code is loaded never changes: look once.
  static const ErrorOr<std::string>* found =
      new ErrorOr<std::string>(FindShimLibrary());  // lives to exit
  return *found;
}

ScopedLaunchShimLibraryOverride::ScopedLaunchShimLibraryOverride(
    std::string path)
    : path_(std::move(path)) {
  std::lock_guard<std::mutex> lock(g_override_mu);
  previous_ = g_override;
  g_override = &path_;
}

ScopedLaunchShimLibraryOverride::~ScopedLaunchShimLibraryOverride() {
  std::lock_guard<std::mutex> lock(g_override_mu);
  g_override = previous_;
}

namespace {

// Whether `module`'s launches go to the driver (launch_record.h): it gets
// its kernels from a CUDA library, the driver's launch is at hand, and
// CUTECALL_LAUNCH_DRIVER is not 0.
bool ToDriver(std::string_view module, bool driver) {
  const char* v = std::getenv("CUTECALL_LAUNCH_DRIVER");
  return driver && !(v != nullptr && std::string_view(v) == "0") &&
         CheckElfImports(module, kLibraryKernelImport).ok();
}

}  // namespace

LaunchRoute RouteLaunches(std::string_view module, const RuntimeTable& rt,
                          bool driver) {
  LaunchRoute route;
  // CUTECALL_LAUNCH_RECORD=0: never routed, the runtime's own path. Else a
  // module of library kernels goes to the driver; the others are routed
  // only where the record is asked for (=1) or reported (launch blocking).
  const char* v = std::getenv("CUTECALL_LAUNCH_RECORD");
  const std::string_view setting = v != nullptr ? v : "";
  if (setting == "0") {
    route.why_not = "CUTECALL_LAUNCH_RECORD=0";
    return route;
  }
  const bool to_driver = ToDriver(module, driver);
  route.shim = to_driver ? kLaunchDriverShim : kLaunchShim;
  if (!to_driver && setting != "1" && !LaunchBlocking()) {
    route.why_not =
        "the module was loaded while CUTECALL_LAUNCH_BLOCKING was off "
        "(set it, or CUTECALL_LAUNCH_RECORD=1, before the first launch)";
    return route;
  }
  if (rt.launch_kernel_ex == nullptr) {
    route.why_not = "the CuTe DSL runtime exports no " +
                    std::string(kLaunchImport);
    return route;
  }
  ErrorOr<std::string> library = LaunchShimLibrary();
  if (!library.ok()) {
    route.why_not = library.status().message();
    return route;
  }
  std::string bytes(module);
  if (Status s = RenameUndefinedSymbol(&bytes, kLaunchImport, route.shim);
      !s.ok()) {
    route.why_not = s.code() == Code::kNotFound
                        ? "the module imports no " + std::string(kLaunchImport)
                        : s.message();
    return route;
  }
  route.bytes = std::move(bytes);
  route.library = std::move(library).value();
  return route;
}

}  // namespace cutecall
