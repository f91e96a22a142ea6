// torch_bundle — a libtorch program calling a bundle kernel (vector_add of
// examples/cpp/installed/kernels_source.py) on torch tensors, on torch's
// current CUDA stream, through the generated header. No Python at run time.
//
//   torch_bundle BUNDLE_DIR        PASS: exit 0
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <cstdio>
#include <type_traits>

#include "cutecall/bundle.h"
#include "kernels.h"

namespace {

// A typed view of a CUDA tensor: its dtype and rank must be the header's.
template <typename T, int Rank>
cutecall::TensorRef<T, Rank> Ref(const torch::Tensor& t) {
  using Elem = std::remove_const_t<T>;
  TORCH_CHECK(t.is_cuda(), "cutecall: a CUDA tensor is needed");
  TORCH_CHECK(t.dim() == Rank, "cutecall: rank ", t.dim(), ", expected ", Rank);
  TORCH_CHECK(t.scalar_type() == c10::CppTypeToScalarType<Elem>::value,
              "cutecall: dtype ", t.scalar_type());
  return cutecall::TensorRef<T, Rank>(static_cast<T*>(t.data_ptr()),
                                      t.sizes().data(), t.strides().data());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: torch_bundle BUNDLE_DIR\n");
    return 2;
  }
  auto bundle = cutecall::Bundle::Open(argv[1]);
  if (!bundle.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", bundle.status().ToString().c_str());
    return 1;
  }
  std::printf("bundle %s, DSL runtime %s\n", argv[1],
              (*bundle)->runtime_library().c_str());
  const int64_t n = 1000003;
  auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  torch::Tensor a = torch::randn({n}, opts), b = torch::randn({n}, opts);
  // A side stream made current: the kernel runs where torch's work runs.
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  torch::Tensor c;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    c = torch::empty_like(a);
    cutecall::Status s = kernels::vector_add(
        **bundle, Ref<const float, 1>(a), Ref<const float, 1>(b), Ref<float, 1>(c),
        at::cuda::getCurrentCUDAStream().stream());
    if (!s.ok()) {
      std::fprintf(stderr, "FAIL: %s\n", s.ToString().c_str());
      return 1;
    }
    c = c * 2;  // ordered after the kernel on the same stream
  }
  side.synchronize();
  if (!torch::allclose(c, (a + b) * 2)) {
    std::fprintf(stderr, "FAIL: c != 2 (a + b)\n");
    return 1;
  }
  // The checks run before the launch: a broken dims= tie is refused.
  torch::Tensor shorter = b.narrow(0, 0, n - 1);
  cutecall::Status tie = kernels::vector_add(
      **bundle, Ref<const float, 1>(a), Ref<const float, 1>(shorter),
      Ref<float, 1>(c), at::cuda::getCurrentCUDAStream().stream());
  std::printf("tie check: %s\n", tie.ToString().c_str());
  if (tie.ok()) return 1;
  std::printf("PASS: vector_add on torch's current stream matches a + b (%lld elements)\n",
              (long long)n);
  return 0;
}
