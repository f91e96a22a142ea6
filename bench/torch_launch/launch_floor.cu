// launch_floor.cu — what one kernel launch costs the host on this machine,
// with no Python and no CuTe DSL: an empty kernel launched 20,000 times in a
// loop with cuLaunchKernel (driver API), cudaLaunchKernel (runtime API),
// cudaLaunchKernelEx with the two launch attributes the CuTe DSL's generated
// host code passes, and cuLaunchKernelEx of the kernel's library handle
// (cudaGetKernel: a CUkernel) with the same attributes -- what cutecall's
// driver launch shim calls (launch_record.h). Best of 5 trials, microseconds per launch (host time of
// the enqueue loop; the stream is synchronized between trials).
//   nvcc -O2 -arch=sm_90 -o launch_floor launch_floor.cu -lcuda && ./launch_floor
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

__global__ void empty_kernel() {}

template <typename F>
double best_us(F&& launch, cudaStream_t stream, int n = 20000, int trials = 5) {
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    cudaStreamSynchronize(stream);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) launch();
    auto end = std::chrono::steady_clock::now();
    cudaStreamSynchronize(stream);
    best = std::min(best, std::chrono::duration<double, std::micro>(end - start).count() / n);
  }
  return best;
}

int main() {
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  empty_kernel<<<1, 32, 0, stream>>>();
  cudaStreamSynchronize(stream);
  CUfunction fn;
  cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(&empty_kernel));
  auto cu = [&] { cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr); };
  auto rt = [&] { cudaLaunchKernel(reinterpret_cast<const void*>(&empty_kernel), dim3(1), dim3(32), nullptr, 0, stream); };
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeCooperative;
  attrs[0].val.cooperative = 0;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 0;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(32);
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  auto ex = [&] { cudaLaunchKernelEx(&cfg, empty_kernel); };
  cudaKernel_t kernel;
  cudaGetKernel(&kernel, empty_kernel);
  CUlaunchConfig dcfg = {};
  dcfg.gridDimX = dcfg.gridDimY = dcfg.gridDimZ = 1;
  dcfg.blockDimX = 32;
  dcfg.blockDimY = dcfg.blockDimZ = 1;
  dcfg.hStream = stream;
  dcfg.attrs = reinterpret_cast<CUlaunchAttribute*>(attrs);  // same layout and ids
  dcfg.numAttrs = 2;
  auto dex = [&] {
    cuLaunchKernelEx(&dcfg, reinterpret_cast<CUfunction>(kernel), nullptr, nullptr);
  };
  std::printf("cuLaunchKernel       %.2f us/launch\n", best_us(cu, stream));
  std::printf("cudaLaunchKernel     %.2f us/launch\n", best_us(rt, stream));
  std::printf("cudaLaunchKernelEx   %.2f us/launch\n", best_us(ex, stream));
  std::printf("cuLaunchKernelEx     %.2f us/launch\n", best_us(dex, stream));
  cudaError_t e = cudaGetLastError();
  std::printf("status %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
