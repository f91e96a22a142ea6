// bench/cpp_bundle's clock: milliseconds between two points, and the host
// time per launch of an enqueue loop, best of `trials`, the stream
// synchronized between trials (launch_floor.cu's way).
#ifndef CUTECALL_BENCH_CPP_BUNDLE_TIMING_H_
#define CUTECALL_BENCH_CPP_BUNDLE_TIMING_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

template <typename F>
double BestUs(F&& launch, cudaStream_t stream, int iters, int trials) {
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    cudaStreamSynchronize(stream);
    auto start = Clock::now();
    for (int i = 0; i < iters; ++i) launch();
    auto end = Clock::now();
    cudaStreamSynchronize(stream);
    best = std::min(best, Ms(start, end) * 1000.0 / iters);
  }
  return best;
}

}  // namespace bench

#endif  // CUTECALL_BENCH_CPP_BUNDLE_TIMING_H_
