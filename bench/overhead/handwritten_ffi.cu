// Hand-written XLA FFI baseline for the launch-overhead benchmark.
//
// The cheapest thing a JAX custom call can do on a GPU: decode the platform
// stream, ignore the buffers, launch an empty kernel <<<1, 32, 0, stream>>>,
// check the launch. Two exported handlers differ only in their traits:
//
//   HandwrittenEmpty         : kCmdBufferCompatible, so XLA may record it into
//                              a CUDA graph (command buffer) with its neighbours.
//   HandwrittenEmptyNoGraph  : no traits, so XLA always launches it eagerly on
//                              the stream, as a thunk of its own.
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

__global__ void cutecall_bench_empty_kernel() {}

ffi::Error LaunchEmpty(cudaStream_t stream, ffi::RemainingArgs /*args*/,
                       ffi::RemainingRets /*rets*/) {
  cutecall_bench_empty_kernel<<<1, 32, 0, stream>>>();
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return ffi::Error::Internal(std::string("empty kernel launch failed: ") +
                                cudaGetErrorName(err) + ": " +
                                cudaGetErrorString(err));
  }
  return ffi::Error::Success();
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
