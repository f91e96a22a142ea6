// launch_record.cc — the launch shims cutecall_launch_kex (to the runtime)
// and cutecall_launch_drv (to the driver), and the per-thread record they
// write (launch_record.h).
#include "launch_record.h"

#include <atomic>
#include <cstdint>

namespace cutecall {
namespace {

// Constant-initialized: no TLS constructor runs on the launch path.
thread_local LaunchRecord t_record;

// The runtime's _cudaLaunchKernelEx (set by module loading).
std::atomic<LaunchKernelExFn> g_forward{nullptr};
// The driver's cuLaunchKernelEx (set by module loading).
std::atomic<DriverLaunchKernelExFn> g_driver{nullptr};

constexpr int kCudaErrorUnknown = 999;

std::string Dim3(const uint32_t (&d)[3]) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " +
         std::to_string(d[2]) + ")";
}

}  // namespace

void ResetLaunchRecord() { t_record = LaunchRecord{}; }

LaunchRecord CurrentLaunchRecord() { return t_record; }

std::string DescribeLaunch(const LaunchRecord& r) {
  if (r.launches == 0) return "grid and block unknown (this call made no launch)";
  std::string s = "grid " + Dim3(r.grid) + ", block " + Dim3(r.block) + ", " +
                  std::to_string(r.dynamic_smem_bytes) +
                  " bytes dynamic shared memory";
  if (r.launches > 1) {
    s += ", the last of " + std::to_string(r.launches) + " launches";
  }
  return s;
}

LaunchKernelExFn SetLaunchForward(LaunchKernelExFn target) {
  return g_forward.exchange(target, std::memory_order_acq_rel);
}

DriverLaunchKernelExFn SetLaunchDriver(DriverLaunchKernelExFn target) {
  return g_driver.exchange(target, std::memory_order_acq_rel);
}

namespace {

// Records `config` on this thread's record.
LaunchRecord& Record(const CudaLaunchConfig* config) {
  LaunchRecord& r = t_record;
  if (config != nullptr) {
    for (int i = 0; i < 3; ++i) {
      r.grid[i] = config->grid[i];
      r.block[i] = config->block[i];
    }
    r.dynamic_smem_bytes = config->dynamic_smem_bytes;
  } else {
    r.grid[0] = r.grid[1] = r.grid[2] = 0;
    r.block[0] = r.block[1] = r.block[2] = 0;
    r.dynamic_smem_bytes = 0;
  }
  ++r.launches;
  return r;
}

int Forward(LaunchRecord& r, const CudaLaunchConfig* config,
            const void* kernel, void** args) {
  LaunchKernelExFn forward = g_forward.load(std::memory_order_acquire);
  r.last_result = forward != nullptr ? forward(config, kernel, args)
                                     : kCudaErrorUnknown;
  return r.last_result;
}

}  // namespace
}  // namespace cutecall

extern "C" int cutecall_launch_kex(const cutecall::CudaLaunchConfig* config,
                                   const void* kernel, void** args) {
  return cutecall::Forward(cutecall::Record(config), config, kernel, args);
}

extern "C" int cutecall_launch_drv(const cutecall::CudaLaunchConfig* config,
                                   const void* kernel, void** args) {
  cutecall::LaunchRecord& r = cutecall::Record(config);
  cutecall::DriverLaunchKernelExFn driver =
      cutecall::g_driver.load(std::memory_order_acquire);
  if (driver != nullptr && config != nullptr &&
      config->dynamic_smem_bytes <= UINT32_MAX) {
    const cutecall::DriverLaunchConfig c{
        {config->grid[0], config->grid[1], config->grid[2]},
        {config->block[0], config->block[1], config->block[2]},
        uint32_t(config->dynamic_smem_bytes),
        config->stream,
        config->attrs,
        config->num_attrs};
    if (driver(&c, kernel, args, nullptr) == 0) {
      r.last_result = 0;
      return 0;
    }
  }
  // Refused (or no driver): the runtime launches it, or names the error as
  // the cudaError_t the module reports. A refused launch enqueued nothing.
  return cutecall::Forward(r, config, kernel, args);
}
