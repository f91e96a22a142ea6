// typed_main — a C++ program calling a bundle through its generated header
// (kernels.h, from `cutecall export ... --header kernels.h`), built against
// the installed package (find_package(cutecall)).
//
//   typed_main BUNDLE --list   open without loading (no GPU needed), list the
//                              entries, check that the header's dims= tie and
//                              a right call are checked as on a GPU
//   typed_main BUNDLE          (built with CUDA) run vector_add and affine on
//                              a GPU and check the results
// The DSL runtime is found without flags (docs/cpp.md). PASS: exit 0.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cutecall/bundle.h"
#include "kernels.h"

#ifdef CUTECALL_EXAMPLE_GPU
#include <cuda_runtime.h>
#endif

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

void List(const cutecall::Bundle& b) {
  std::printf("bundle %s: %zu entries, manifest-sha256 %s, DSL runtime %s\n",
              b.path().c_str(), b.size(), b.digest().c_str(),
              b.runtime().version.empty() ? "(not recorded)"
                                          : b.runtime().version.c_str());
  for (size_t i = 0; i < b.size(); ++i) {
    const cutecall::BundleKernel& k = b.kernel(i);
    std::string scalars;
    for (size_t j = 0; j < k.scalar_types().size(); ++j) {
      scalars += (j ? ", " : "") + k.scalar_types()[j] + " " + k.scalar_names()[j];
    }
    std::printf("  entry %s: %s, %zu inputs, %zu outputs, scalars (%s)\n",
                k.name().c_str(), k.arch().c_str(), k.num_inputs(),
                k.num_outputs(), scalars.c_str());
  }
}

// Without loaded modules every check before the launch still runs: a
// broken dims= tie is refused with Python's text; a right call reaches the
// launch and is refused there for want of modules.
int CheckWithoutGpu(const cutecall::Bundle& b) {
  auto* p = reinterpret_cast<float*>(uintptr_t(1) << 20);  // aligned, unused
  cutecall::TensorRef<float, 1> a(p, {1000}), shorter(p, {999}), c(p, {1000});
  cutecall::Status tie = kernels::vector_add(b, a, shorter, c, nullptr);
  std::printf("tie check: %s\n", tie.ToString().c_str());
  if (tie.code() != cutecall::Code::kInvalidArgument ||
      tie.message().find("tied dim 'n'") == std::string::npos) {
    return Fail("a broken dims= tie was not refused");
  }
  cutecall::Status right = kernels::vector_add(b, a, a, c, nullptr);
  std::printf("right call: %s\n", right.ToString().c_str());
  if (right.message().find("load_modules = false") == std::string::npos) {
    return Fail("a right call did not reach the launch");
  }
  return 0;
}

#ifdef CUTECALL_EXAMPLE_GPU
int RunOnGpu(const cutecall::Bundle& b) {
  const int64_t n = 1000003;
  std::vector<float> ha(n), hb(n), hc(n);
  for (int64_t i = 0; i < n; ++i) {
    ha[i] = 0.5f * float(i % 1000);
    hb[i] = 1.0f - float(i % 7);
  }
  float *a, *bb, *c;
  cudaStream_t stream;
  if (cudaMalloc(&a, n * 4) || cudaMalloc(&bb, n * 4) || cudaMalloc(&c, n * 4) ||
      cudaStreamCreate(&stream)) {
    return Fail("CUDA allocation");
  }
  cudaMemcpy(a, ha.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(bb, hb.data(), n * 4, cudaMemcpyHostToDevice);
  cutecall::TensorRef<float, 1> ta(a, {n}), tb(bb, {n}), tc(c, {n});
  if (cutecall::Status s = kernels::vector_add(b, ta, tb, tc, stream); !s.ok()) {
    return Fail(s.ToString());
  }
  cudaStreamSynchronize(stream);
  cudaMemcpy(hc.data(), c, n * 4, cudaMemcpyDeviceToHost);
  for (int64_t i = 0; i < n; ++i) {
    if (hc[i] != ha[i] + hb[i]) return Fail("vector_add: c[" + std::to_string(i) + "]");
  }
  std::printf("vector_add: %lld elements match a + b\n", (long long)n);
  // affine: out = -(scale * x + shift + offset), x of 64.
  cutecall::TensorRef<float, 1> x(a, {64}), out(c, {64});
  if (cutecall::Status s = kernels::affine(b, x, out, 2.0f, 3, 4, true, stream); !s.ok()) {
    return Fail(s.ToString());
  }
  cudaStreamSynchronize(stream);
  cudaMemcpy(hc.data(), c, 64 * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 64; ++i) {
    if (hc[i] != -(2.0f * ha[i] + 3 + 4)) return Fail("affine: out[" + std::to_string(i) + "]");
  }
  std::printf("affine: 64 elements match -(2 x + 3 + 4)\n");
  cudaFree(a);
  cudaFree(bb);
  cudaFree(c);
  cudaStreamDestroy(stream);
  // The tie is checked before launching: nothing runs.
  cutecall::TensorRef<float, 1> shorter(bb, {n - 1});
  cutecall::Status tie = kernels::vector_add(b, ta, shorter, tc, nullptr);
  std::printf("tie check: %s\n", tie.ToString().c_str());
  if (tie.message().find("tied dim 'n'") == std::string::npos) {
    return Fail("a broken dims= tie was not refused");
  }
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: typed_main BUNDLE_DIR [--list]\n");
    return 2;
  }
  const bool list = argc > 2 && std::strcmp(argv[2], "--list") == 0;
  cutecall::BundleOptions options;
  options.load_modules = !list;
  if (!list) options.device = 0;  // check every kernel against GPU 0
  auto bundle = cutecall::Bundle::Open(argv[1], options);
  if (!bundle.ok()) return Fail(bundle.status().ToString());
  List(**bundle);
  int rc = 0;
  if (list) {
    rc = CheckWithoutGpu(**bundle);
  } else {
#ifdef CUTECALL_EXAMPLE_GPU
    std::printf("DSL runtime library: %s\n", (*bundle)->runtime_library().c_str());
    rc = RunOnGpu(**bundle);
#else
    return Fail("built without CUDA: only --list");
#endif
  }
  if (rc == 0) std::printf("PASS\n");
  return rc;
}
