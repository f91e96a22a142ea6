// Hand-written XLA FFI baseline for the launch-overhead benchmark.
//
// The cheapest thing a JAX custom call can do on a GPU: decode the platform
// stream, ignore the buffers, launch an empty kernel <<<1, 32, 0, stream>>>,
// check the launch. Three exported handlers:
//
//   HandwrittenEmpty         : kCmdBufferCompatible, so XLA may record it into
//                              a CUDA graph (command buffer) with its neighbours.
//   HandwrittenEmptyNoGraph  : the same without traits, so XLA always launches
//                              it eagerly on the stream, as a thunk of its own.
//   HandwrittenEmptyEx       : kCmdBufferCompatible, launching the way the CuTe
//                              DSL's generated host code does: the kernel gets,
//                              once, cudaFuncAttributeMaxDynamicSharedMemorySize
//                              = (opt-in max - static) shared memory and
//                              cudaFuncAttributeNonPortableClusterSizeAllowed = 1,
//                              and every launch is cudaLaunchKernelEx with the
//                              attributes Cooperative = 0 and
//                              ProgrammaticStreamSerialization = 0. It isolates
//                              what that launch style costs from what cutecall
//                              adds on top.
//
// HandwrittenEmptyEx launches its own instance of the empty kernel, so the
// attributes it sets never touch the kernel the other two launch.
//
// Loaded from Python with ctypes and registered with
//   jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(lib.HandwrittenEmpty),
//                               platform="CUDA")
// (bench/overhead/run.py does that). Build: bench/overhead/build_handler.sh.

#include <cuda_runtime.h>

#include <string>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Instance 0: plain launches. Instance 1: DSL-style launches.
template <int kInstance>
__global__ void cutecall_bench_empty_kernel() {}

ffi::Error CheckCuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string(what) + ": " + cudaGetErrorName(err) +
                              ": " + cudaGetErrorString(err));
}

ffi::Error LaunchEmpty(cudaStream_t stream, ffi::RemainingArgs /*args*/,
                       ffi::RemainingRets /*rets*/) {
  cutecall_bench_empty_kernel<0><<<1, 32, 0, stream>>>();
  return CheckCuda(cudaGetLastError(), "empty kernel launch failed");
}

// The DSL's one-time kernel set-up, on the current device. Runs on first use
// (a function-local static: thread-safe, once per process); a failure is
// kept and reported by every launch.
cudaError_t ConfigureExKernelOnce() {
  static const cudaError_t status = [] {
    auto* kernel = cutecall_bench_empty_kernel<1>;
    int device = 0;
    int optin_smem = 0;
    cudaFuncAttributes attrs{};
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) {
      err = cudaDeviceGetAttribute(&optin_smem,
                                   cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                   device);
    }
    if (err == cudaSuccess) err = cudaFuncGetAttributes(&attrs, kernel);
    if (err == cudaSuccess) {
      err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          optin_smem - static_cast<int>(attrs.sharedSizeBytes));
    }
    if (err == cudaSuccess) {
      err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    }
    return err;
  }();
  return status;
}

ffi::Error LaunchEmptyEx(cudaStream_t stream, ffi::RemainingArgs /*args*/,
                         ffi::RemainingRets /*rets*/) {
  ffi::Error setup =
      CheckCuda(ConfigureExKernelOnce(), "empty kernel attribute set-up failed");
  if (setup.failure()) return setup;
  cudaLaunchAttribute attrs[2] = {};
  attrs[0].id = cudaLaunchAttributeCooperative;
  attrs[0].val.cooperative = 0;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1, 1, 1);
  config.blockDim = dim3(32, 1, 1);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 2;
  return CheckCuda(cudaLaunchKernelEx(&config, cutecall_bench_empty_kernel<1>),
                   "empty kernel cudaLaunchKernelEx failed");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(HandwrittenEmpty, LaunchEmpty,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .RemainingArgs()
                                  .RemainingRets(),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(HandwrittenEmptyNoGraph, LaunchEmpty,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(HandwrittenEmptyEx, LaunchEmptyEx,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .RemainingArgs()
                                  .RemainingRets(),
                              {ffi::Traits::kCmdBufferCompatible});
