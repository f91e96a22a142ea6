// launch_record.cc — the launch shim cutecall_launch_kex and the per-thread
// record it writes (launch_record.h).
#include "launch_record.h"

#include <atomic>

namespace cutecall {
namespace {

// Constant-initialized: no TLS constructor runs on the launch path.
thread_local LaunchRecord t_record;

// The runtime's _cudaLaunchKernelEx (set by module loading).
std::atomic<LaunchKernelExFn> g_forward{nullptr};

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

}  // namespace cutecall

extern "C" int cutecall_launch_kex(const cutecall::CudaLaunchConfig* config,
                                   const void* kernel, void** args) {
  cutecall::LaunchRecord& r = cutecall::t_record;
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
  cutecall::LaunchKernelExFn forward =
      cutecall::g_forward.load(std::memory_order_acquire);
  r.last_result = forward != nullptr ? forward(config, kernel, args)
                                     : cutecall::kCudaErrorUnknown;
  return r.last_result;
}
