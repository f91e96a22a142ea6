// device_context.h — running a launch on a given CUDA device.
//
// Owns: the five CUDA driver entry points cutecall needs to launch on a
// device that is not the calling thread's current one (a torch tensor on
// cuda:1 while cuda:0 is current), resolved from libcuda.so.1 with dlopen
// once per process, and the test override that replaces them. Primary
// contexts are retained once per device and never released (as the CUDA
// runtime does).
// Contract: OnDevice costs one driver call when `device` is already current;
// otherwise it makes the device's primary context current for `fn` and
// restores the previous context afterwards, whatever `fn` returns. No C++
// exception crosses it; driver failures are Internal errors naming the call.
#ifndef CUTECALL_SRC_DEVICE_CONTEXT_H_
#define CUTECALL_SRC_DEVICE_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "cutecall/status.h"

namespace cutecall {

// Mirrors the driver's CUlaunchConfig (cuda.h), which cuLaunchKernelEx
// takes. Laid out as cudaLaunchConfig_t (runtime_table.h's CudaLaunchConfig)
// but for the shared memory size, 32 bits here; the attributes
// (CUlaunchAttribute, cudaLaunchAttribute) are the same structs with the same
// ids, so a runtime launch's attribute array passes to the driver as it is.
struct DriverLaunchConfig {
  uint32_t grid[3];            // gridDimX, Y, Z
  uint32_t block[3];           // blockDimX, Y, Z
  uint32_t shared_mem_bytes;   // sharedMemBytes
  void* stream;                // hStream
  void* attrs;                 // CUlaunchAttribute*
  uint32_t num_attrs;          // numAttrs
};
static_assert(offsetof(DriverLaunchConfig, block) == 12 &&
                  offsetof(DriverLaunchConfig, shared_mem_bytes) == 24 &&
                  offsetof(DriverLaunchConfig, stream) == 32 &&
                  offsetof(DriverLaunchConfig, attrs) == 40 &&
                  offsetof(DriverLaunchConfig, num_attrs) == 48 &&
                  sizeof(DriverLaunchConfig) == 56,
              "DriverLaunchConfig must match CUlaunchConfig");

// CUresult cuLaunchKernelEx(config, f, kernelParams, extra): `f` a CUfunction
// or a CUkernel (a cudaKernel_t is one).
using DriverLaunchKernelExFn = int (*)(const DriverLaunchConfig* config,
                                       const void* f, void** params,
                                       void** extra);

// CUresult-returning driver functions; CUdevice is int, CUcontext a pointer.
struct DriverTable {
  int (*init)(unsigned flags) = nullptr;
  int (*ctx_get_device)(int* device) = nullptr;
  int (*ctx_get_current)(void** context) = nullptr;
  int (*ctx_set_current)(void* context) = nullptr;
  int (*primary_ctx_retain)(void** context, int device) = nullptr;
  // For CUTECALL_LAUNCH_BLOCKING (launch_blocking.h).
  int (*stream_synchronize)(void* stream) = nullptr;
  int (*stream_is_capturing)(void* stream, int* capture_status) = nullptr;
  int (*get_error_name)(int code, const char** name) = nullptr;
  // For DeviceArch and the driver's CUDA version (cutecall doctor).
  int (*device_get)(int* device, int ordinal) = nullptr;
  int (*device_get_attribute)(int* value, int attribute, int device) = nullptr;
  int (*driver_get_version)(int* version) = nullptr;
  // Optional: launches of modules routed to the driver
  // (launch_record.h); null where the driver lacks it.
  DriverLaunchKernelExFn launch_kernel_ex = nullptr;
};

// The active driver table, loading libcuda.so.1 on first use.
ErrorOr<const DriverTable*> Driver();

// Runs `fn` (returning Status) with `device` current on this thread.
template <typename Fn>
Status OnDevice(const DriverTable& d, int device, Fn&& fn);

// The arch cutecall compiles for on device `ordinal`: "sm_<major><minor>",
// with an 'a' suffix from compute capability 9.0 on ("sm_90a" on an H100).
ErrorOr<std::string> DeviceArch(const DriverTable& d, int ordinal);

// What kernels read of a device while they are traced (the SM count a
// persistent scheduler sizes its grid by, shared memory, L2), from the
// driver's attributes. Python keys compiles by them (cutecall.Target).
struct DeviceAttributes {
  int sm_count = 0;             // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  int smem_per_block_optin = 0; // ..._MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, bytes
  int smem_per_sm = 0;          // ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
  int l2_bytes = 0;             // ..._L2_CACHE_SIZE
  int major = 0, minor = 0;     // compute capability
};
ErrorOr<DeviceAttributes> ReadDeviceAttributes(const DriverTable& d, int ordinal);

// Replaces the driver for the lifetime of the guard (tests). Nests.
class ScopedDriverOverride {
 public:
  explicit ScopedDriverOverride(const DriverTable* table);
  ~ScopedDriverOverride();
  ScopedDriverOverride(const ScopedDriverOverride&) = delete;
  ScopedDriverOverride& operator=(const ScopedDriverOverride&) = delete;

 private:
  const DriverTable* previous_;
};

namespace internal {
// The primary context of `device`, retained on first use (cached).
ErrorOr<void*> PrimaryContext(const DriverTable& d, int device);
Status DriverError(const char* call, int code, int device);
}  // namespace internal

template <typename Fn>
Status OnDevice(const DriverTable& d, int device, Fn&& fn) {
  int current = -1;
  if (d.ctx_get_device(&current) == 0 && current == device) return fn();
  ErrorOr<void*> primary = internal::PrimaryContext(d, device);
  if (!primary.ok()) return primary.status();
  void* previous = nullptr;
  if (int rc = d.ctx_get_current(&previous); rc != 0) {
    return internal::DriverError("cuCtxGetCurrent", rc, device);
  }
  if (int rc = d.ctx_set_current(primary.value()); rc != 0) {
    return internal::DriverError("cuCtxSetCurrent", rc, device);
  }
  Status s = fn();
  if (int rc = d.ctx_set_current(previous); rc != 0 && s.ok()) {
    return internal::DriverError("cuCtxSetCurrent (restore)", rc, device);
  }
  return s;
}

}  // namespace cutecall

#endif  // CUTECALL_SRC_DEVICE_CONTEXT_H_
