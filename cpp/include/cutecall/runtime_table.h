// cutecall/runtime_table.h — the CuTe DSL runtime, behind six function
// pointers and one optional seventh.
//
// Owns: resolving libcute_dsl_runtime.so (closed source, shipped in the
// nvidia-cutlass-dsl-libs-cuXX wheel; never linked, never vendored) with
// dlopen, once per process, and the test override that replaces it.
// The six CuteDSLRT_* entry points are required; _cudaLaunchKernelEx (the
// launch call the runtime's JIT links compiled modules against) is optional:
// without it launches are not recorded (cpp/src/launch_record.h, internal).
// Resolution order: an active ScopedRuntimeOverride; the path given to
// SetRuntimeLibraryPath; $CUTECALL_DSL_RUNTIME. A failed resolution is not
// cached, so a later call with a corrected path succeeds.
#ifndef CUTECALL_RUNTIME_TABLE_H_
#define CUTECALL_RUNTIME_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "cutecall/status.h"

namespace cutecall {

// Mirrors CUDA's cudaLaunchConfig_t, which a compiled module's launcher
// fills and passes to _cudaLaunchKernelEx (cudaLaunchKernelExC's signature).
struct CudaLaunchConfig {
  uint32_t grid[3];             // gridDim
  uint32_t block[3];            // blockDim
  size_t dynamic_smem_bytes;    // dynamicSmemBytes
  void* stream;                 // cudaStream_t
  void* attrs;                  // cudaLaunchAttribute*
  uint32_t num_attrs;           // numAttrs
};
static_assert(offsetof(CudaLaunchConfig, block) == 12 &&
                  offsetof(CudaLaunchConfig, dynamic_smem_bytes) == 24 &&
                  offsetof(CudaLaunchConfig, stream) == 32 &&
                  offsetof(CudaLaunchConfig, attrs) == 40 &&
                  offsetof(CudaLaunchConfig, num_attrs) == 48,
              "CudaLaunchConfig must match cudaLaunchConfig_t");

// int _cudaLaunchKernelEx(config, kernel, args): returns a cudaError_t.
using LaunchKernelExFn = int (*)(const CudaLaunchConfig* config,
                                 const void* kernel, void** args);

// Mirrors CuteDSLRuntime.h; enums travel as int (C enums are int-sized).
struct RuntimeTable {
  int (*module_create_from_bytes)(void** module, const unsigned char* bytes,
                                  size_t size, const char** shared_libs,
                                  size_t num_shared_libs) = nullptr;
  int (*module_get_function)(void** function, void* module,
                             const char* prefix) = nullptr;
  int (*function_run)(void* function, void** args, size_t num_args) = nullptr;
  int (*module_destroy)(void* module) = nullptr;
  const char* (*get_error_name)(int error) = nullptr;
  const char* (*get_error_string)(int error) = nullptr;
  // Optional: the runtime's _cudaLaunchKernelEx, nullptr where not exported.
  LaunchKernelExFn launch_kernel_ex = nullptr;
};

// Sets the library path used by the next resolution (no effect once resolved).
void SetRuntimeLibraryPath(std::string path);
// The path that was or will be used; empty if none is known.
std::string RuntimeLibraryPath();
// Whether a real library has been loaded in this process.
bool RuntimeLoaded();

// Returns the active table, loading the library on first use.
ErrorOr<const RuntimeTable*> Runtime();

// "CuteDSLRT_Error_X (description)" for a runtime error code.
std::string RuntimeErrorText(const RuntimeTable& rt, int code);
// "cudaErrorX" for common CUDA codes, else "CUDA error N".
std::string CudaErrorText(int code);

// Replaces the runtime for the lifetime of the guard (tests). Nests.
class ScopedRuntimeOverride {
 public:
  explicit ScopedRuntimeOverride(const RuntimeTable* table);
  ~ScopedRuntimeOverride();
  ScopedRuntimeOverride(const ScopedRuntimeOverride&) = delete;
  ScopedRuntimeOverride& operator=(const ScopedRuntimeOverride&) = delete;

 private:
  const RuntimeTable* previous_;
};

}  // namespace cutecall

#endif  // CUTECALL_RUNTIME_TABLE_H_
