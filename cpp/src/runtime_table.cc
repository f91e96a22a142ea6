#include "cutecall/runtime_table.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "load_stats.h"

namespace cutecall {
namespace {

struct Loader {
  std::mutex mu;
  std::string path;
  RuntimeTable table;
  bool loaded = false;
  const RuntimeTable* override_table = nullptr;
};

Loader& GetLoader() {
  static Loader* loader = new Loader();  // never destroyed: used at exit
  return *loader;
}

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
  }
  return *out != nullptr;
}

// The path set explicitly, else $CUTECALL_DSL_RUNTIME, else "". Holds l.mu.
std::string ConfiguredPath(const Loader& l) {
  if (!l.path.empty()) return l.path;
  const char* env = std::getenv("CUTECALL_DSL_RUNTIME");
  return env ? env : "";
}

}  // namespace

void SetRuntimeLibraryPath(std::string path) {
  Loader& l = GetLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  if (!l.loaded) l.path = std::move(path);
}

std::string RuntimeLibraryPath() {
  Loader& l = GetLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  return ConfiguredPath(l);
}

bool RuntimeLoaded() {
  Loader& l = GetLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.loaded;
}

ErrorOr<const RuntimeTable*> Runtime() {
  Loader& l = GetLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.override_table != nullptr) return l.override_table;
  if (l.loaded) return &l.table;
  std::string path = ConfiguredPath(l);
  if (path.empty()) {
    return FailedPrecondition(
        "cutecall: the CuTe DSL runtime library (libcute_dsl_runtime.so) was "
        "not found. Install nvidia-cutlass-dsl-libs-cu13 (or -cu12) or set "
        "CUTECALL_DSL_RUNTIME to its path.");
  }
  const load_stats::Stopwatch watch;  // dlopen and dlsym, for BundleLoadStats
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return FailedPrecondition("cutecall: cannot load the CuTe DSL runtime '" +
                              path + "': " + (err ? err : "unknown error"));
  }
  RuntimeTable t;
  std::string missing;
  Resolve(handle, "CuteDSLRT_Module_Create_From_Bytes",
          &t.module_create_from_bytes, &missing);
  Resolve(handle, "CuteDSLRT_Module_Get_Function", &t.module_get_function,
          &missing);
  Resolve(handle, "CuteDSLRT_Function_Run", &t.function_run, &missing);
  Resolve(handle, "CuteDSLRT_Module_Destroy", &t.module_destroy, &missing);
  Resolve(handle, "CuteDSLRT_GetErrorName", &t.get_error_name, &missing);
  Resolve(handle, "CuteDSLRT_GetErrorString", &t.get_error_string, &missing);
  if (!missing.empty()) {
    dlclose(handle);
    return FailedPrecondition("cutecall: '" + path +
                              "' is not a CuTe DSL runtime: missing " + missing);
  }
  // Optional: its absence only leaves launches unrecorded.
  t.launch_kernel_ex =
      reinterpret_cast<LaunchKernelExFn>(dlsym(handle, "_cudaLaunchKernelEx"));
  l.table = t;
  l.path = path;
  l.loaded = true;  // the handle stays open for the life of the process
  load_stats::Record(load_stats::Event::kRuntimeDlopen, watch.Ms());
  return &l.table;
}

std::string RuntimeErrorText(const RuntimeTable& rt, int code) {
  const char* name = rt.get_error_name ? rt.get_error_name(code) : nullptr;
  const char* text = rt.get_error_string ? rt.get_error_string(code) : nullptr;
  std::string s = name ? name : "CuteDSLRT error " + std::to_string(code);
  if (text && *text) s += std::string(" (") + text + ")";
  return s;
}

std::string CudaErrorText(int code) {
  switch (code) {
    case 1: return "cudaErrorInvalidValue (1)";
    case 2: return "cudaErrorMemoryAllocation (2)";
    case 3: return "cudaErrorInitializationError (3)";
    case 35: return "cudaErrorInsufficientDriver (35)";
    case 98: return "cudaErrorInvalidDeviceFunction (98)";
    case 100: return "cudaErrorNoDevice (100)";
    case 101: return "cudaErrorInvalidDevice (101)";
    case 200: return "cudaErrorInvalidKernelImage (200)";
    case 209: return "cudaErrorNoKernelImageForDevice (209)";
    case 400: return "cudaErrorInvalidResourceHandle (400)";
    case 700: return "cudaErrorIllegalAddress (700)";
    case 701: return "cudaErrorLaunchOutOfResources (701)";
    case 702: return "cudaErrorLaunchTimeout (702)";
    case 716: return "cudaErrorMisalignedAddress (716)";
    case 719: return "cudaErrorLaunchFailure (719)";
    case 900: return "cudaErrorStreamCaptureUnsupported (900)";
    default: return "CUDA error " + std::to_string(code);
  }
}

ScopedRuntimeOverride::ScopedRuntimeOverride(const RuntimeTable* table) {
  Loader& l = GetLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  previous_ = l.override_table;
  l.override_table = table;
}

ScopedRuntimeOverride::~ScopedRuntimeOverride() {
  Loader& l = GetLoader();
  std::lock_guard<std::mutex> lock(l.mu);
  l.override_table = previous_;
}

}  // namespace cutecall
