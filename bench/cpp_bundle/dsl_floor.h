// bench/cpp_bundle: the DSL launcher's floor (dsl_floor.cc).
#ifndef CUTECALL_BENCH_CPP_BUNDLE_DSL_FLOOR_H_
#define CUTECALL_BENCH_CPP_BUNDLE_DSL_FLOOR_H_

#include <cuda_runtime.h>

#include <string>

#include "cutecall/bundle.h"

namespace bench {

// Host us per launch of kernel `k`'s compiled launcher called directly
// (CuteDSLRT_Function_Run, slots packed once), best of `trials` loops of
// `iters`; -1 with *why set when it cannot be measured.
double DslFloorUs(const std::string& bundle, const cutecall::BundleKernel& k,
                  cudaStream_t stream, cutecall::Span<cutecall::BufferView> in,
                  cutecall::Span<cutecall::BufferView> out, int iters,
                  int trials, std::string* why);

}  // namespace bench

#endif  // CUTECALL_BENCH_CPP_BUNDLE_DSL_FLOOR_H_
