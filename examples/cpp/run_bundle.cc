// run_bundle — run a kernel from a cutecall bundle in a C++ program with no
// Python: open the bundle, look the kernel up, launch it on a CUDA stream
// with device buffers allocated here, copy the result back and check it.
//
//   run_bundle BUNDLE_DIR [--kernel vector_add] [--n 1000003]
//              [--runtime /path/to/libcute_dsl_runtime.so] [--digest HEX]
//
// The kernel must compute c = a + b on 1-D float32 arrays (cutecall's
// examples.kernels.vector_add, exported by tools/gpu/gpu cpp-example). The
// CuTe DSL runtime library comes from --runtime or $CUTECALL_DSL_RUNTIME, else
// Bundle::Open finds the one the bundle records (docs/cpp.md).
// Prints PASS (exit 0) or FAIL (exit 1).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cutecall/bundle.h"
#include "cutecall/runtime_table.h"

namespace {

bool CudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

struct Args {
  std::string bundle, kernel = "vector_add", runtime, digest;
  int64_t n = 1000003;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--kernel" && has_value) {
      a->kernel = argv[++i];
    } else if (arg == "--n" && has_value) {
      a->n = std::atoll(argv[++i]);
    } else if (arg == "--runtime" && has_value) {
      a->runtime = argv[++i];
    } else if (arg == "--digest" && has_value) {
      a->digest = argv[++i];
    } else if (a->bundle.empty() && !arg.empty() && arg[0] != '-') {
      a->bundle = arg;
    } else {
      return false;
    }
  }
  return !a->bundle.empty() && a->n > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: run_bundle BUNDLE_DIR [--kernel NAME] [--n N] "
                 "[--runtime libcute_dsl_runtime.so] [--digest HEX]\n");
    return 2;
  }
  if (!args.runtime.empty()) cutecall::SetRuntimeLibraryPath(args.runtime);

  // The device, so that the bundle refuses kernels it cannot run (another
  // arch) and kernels built for another GPU (what they read while traced:
  // the SM count, shared memory, L2). `options.device = 0` reads the same
  // from the CUDA driver.
  cudaDeviceProp prop;
  if (!CudaOk(cudaSetDevice(0), "cudaSetDevice") ||
      !CudaOk(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) {
    return 1;
  }
  cutecall::BundleOptions options;
  options.device_arch = "sm_" + std::to_string(prop.major * 10 + prop.minor);
  options.device_properties = {prop.multiProcessorCount,
                               int(prop.sharedMemPerBlockOptin),
                               int(prop.sharedMemPerMultiprocessor),
                               prop.l2CacheSize};
  options.expected_digest = args.digest;
  std::printf("device: %s (%s)\n", prop.name, options.device_arch.c_str());

  auto bundle = cutecall::Bundle::Open(args.bundle, options);
  if (!bundle.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", bundle.status().ToString().c_str());
    return 1;
  }
  std::printf("bundle: %s (manifest-sha256 %s, %zu kernels, DSL %s)\n",
              (*bundle)->path().c_str(), (*bundle)->digest().c_str(),
              (*bundle)->names().size(), (*bundle)->dsl_version().c_str());
  auto kernel = (*bundle)->Find(args.kernel);
  if (!kernel.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", kernel.status().ToString().c_str());
    return 1;
  }
  const cutecall::BundleKernel* k = kernel.value();
  if (k->num_inputs() != 2 || k->num_outputs() != 1 ||
      k->plan().num_scalars() != 0) {
    std::fprintf(stderr, "FAIL: kernel '%s' is not c = a + b (2 inputs, 1 "
                 "output, no scalars)\n", k->name().c_str());
    return 1;
  }

  const int64_t n = args.n;
  const size_t bytes = size_t(n) * sizeof(float);
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.5f * float(i % 1000);
    b[i] = 1.0f - float(i % 7);
  }
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  cudaStream_t stream = nullptr;
  bool ok = CudaOk(cudaMalloc(&da, bytes), "cudaMalloc") &&
            CudaOk(cudaMalloc(&db, bytes), "cudaMalloc") &&
            CudaOk(cudaMalloc(&dc, bytes), "cudaMalloc") &&
            CudaOk(cudaStreamCreate(&stream), "cudaStreamCreate") &&
            CudaOk(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice),
                   "copy a") &&
            CudaOk(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice),
                   "copy b");
  if (ok) {
    const int64_t shape[] = {n};
    cutecall::Status s =
        k->Run(stream, {{da, shape, 1}, {db, shape, 1}}, {{dc, shape, 1}});
    if (!s.ok()) std::fprintf(stderr, "FAIL: %s\n", s.ToString().c_str());
    ok = s.ok() && CudaOk(cudaStreamSynchronize(stream), "kernel") &&
         CudaOk(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost),
                "copy c");
  }
  int64_t wrong = 0;
  for (int64_t i = 0; ok && i < n; ++i) {
    if (c[i] != a[i] + b[i]) {
      if (wrong++ < 5) {
        std::fprintf(stderr, "c[%lld] = %g, expected %g\n", (long long)i,
                     c[i], a[i] + b[i]);
      }
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  if (stream) cudaStreamDestroy(stream);
  if (!ok) return 1;  // the failure is printed above
  if (wrong) {
    std::printf("FAIL: %lld of %lld elements wrong\n", (long long)wrong,
                (long long)n);
    return 1;
  }
  std::printf("PASS: %s on %lld elements matches a + b\n", k->name().c_str(),
              (long long)n);
  return 0;
}
