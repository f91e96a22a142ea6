// cpp_bundle_bench — what bundles cost the host from C++ (issue 38): a cold
// Bundle::Open (runtime dlopen, every module loaded), the first launch, a
// second Open of the same bundle (modules shared), and per-launch host time
// of BundleKernel::Run, the generated typed function, the C ABI and a bare
// cuLaunchKernel of an empty kernel with vector_add's parameters, then Run
// from several threads at once. Host time of the enqueue loop, best of
// --trials, the stream synchronized between trials (launch_floor.cu's way).
//
//   cpp_bundle_bench BUNDLE [--kernel vector_add] [--n 4096] [--iters 20000]
//                    [--trials 5] [--threads 4] [--out result.json]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cutecall/bundle.h"
#include "cutecall/cutecall_c.h"
#include "kernels.h"

extern "C" CUfunction BareKernel();

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Args {
  std::string bundle, kernel = "vector_add", out;
  int64_t n = 4096;
  int iters = 20000, trials = 5, threads = 4;
};

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

int Die(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (s == "--kernel") a.kernel = next();
    else if (s == "--n") a.n = std::atoll(next().c_str());
    else if (s == "--iters") a.iters = std::atoi(next().c_str());
    else if (s == "--trials") a.trials = std::atoi(next().c_str());
    else if (s == "--threads") a.threads = std::atoi(next().c_str());
    else if (s == "--out") a.out = next();
    else a.bundle = s;
  }
  if (a.bundle.empty()) return Die("usage: cpp_bundle_bench BUNDLE [options]");
  auto t0 = Clock::now();
  cudaSetDevice(0);
  cudaFree(nullptr);  // the context: a process has it before it opens bundles
  auto t1 = Clock::now();
  auto bundle = cutecall::Bundle::Open(a.bundle);
  auto t2 = Clock::now();
  if (!bundle.ok()) return Die(bundle.status().ToString());
  const cutecall::BundleKernel* k = (*bundle)->FindOrNull(a.kernel);
  if (k == nullptr) return Die("no kernel " + a.kernel);

  float *x, *y, *z;
  cudaStream_t stream;
  const size_t bytes = size_t(a.n) * sizeof(float);
  if (cudaMalloc(&x, bytes) || cudaMalloc(&y, bytes) || cudaMalloc(&z, bytes) ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) {
    return Die("CUDA allocation");
  }
  const int64_t dims[] = {a.n};
  const cutecall::BufferView in[] = {{x, dims, 1}, {y, dims, 1}};
  const cutecall::BufferView out[] = {{z, dims, 1}};
  auto t3 = Clock::now();
  cutecall::Status first = k->Run(stream, {in, 2}, {out, 1});
  auto t4 = Clock::now();
  cudaStreamSynchronize(stream);
  auto t5 = Clock::now();
  if (!first.ok()) return Die(first.ToString());
  auto again = cutecall::Bundle::Open(a.bundle);
  auto t6 = Clock::now();
  if (!again.ok()) return Die(again.status().ToString());

  auto run = [&] { (void)k->Run(stream, {in, 2}, {out, 1}); };
  cutecall::TensorRef<float, 1> tx(x, {a.n}), ty(y, {a.n}), tz(z, {a.n});
  const cutecall::Bundle& b = **bundle;
  auto typed = [&] { (void)kernels::vector_add(b, tx, ty, tz, stream); };
  cutecall_bundle* cb = nullptr;
  const cutecall_kernel* ck = nullptr;
  if (cutecall_bundle_open(a.bundle.c_str(), nullptr, &cb) != CUTECALL_OK ||
      cutecall_bundle_find(cb, a.kernel.c_str(), &ck) != CUTECALL_OK) {
    return Die(cutecall_last_error());
  }
  const cutecall_tensor cin[] = {{x, dims, 1, nullptr}, {y, dims, 1, nullptr}};
  const cutecall_tensor cout_[] = {{z, dims, 1, nullptr}};
  auto c_abi = [&] { (void)cutecall_kernel_run(ck, stream, cin, 2, cout_, 1, nullptr, 0); };
  CUfunction bare = BareKernel();
  int n32 = int(a.n);
  void* params[] = {&x, &y, &z, &n32};
  const unsigned grid = unsigned((a.n + 255) / 256);
  auto cu = [&] { cuLaunchKernel(bare, grid, 1, 1, 256, 1, 1, 0, stream, params, nullptr); };

  const double run_us = BestUs(run, stream, a.iters, a.trials);
  const double typed_us = BestUs(typed, stream, a.iters, a.trials);
  const double c_us = BestUs(c_abi, stream, a.iters, a.trials);
  const double cu_us = BestUs(cu, stream, a.iters, a.trials);

  // Many threads: each its own stream, all launching at once.
  std::vector<double> per_thread(size_t(a.threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < a.threads; ++t) {
    pool.emplace_back([&, t] {
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      per_thread[size_t(t)] = BestUs([&] { (void)k->Run(s, {in, 2}, {out, 1}); }, s,
                                     a.iters, a.trials);
      cudaStreamDestroy(s);
    });
  }
  for (auto& th : pool) th.join();
  double threads_us = 0;
  for (double v : per_thread) threads_us = std::max(threads_us, v);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return Die(cudaGetErrorString(err));
  cutecall_bundle_close(cb);

  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  char json[2048];
  std::snprintf(json, sizeof json,
      "{\"device\": \"%s\", \"bundle_kernels\": %zu, \"kernel\": \"%s\", \"n\": %lld, "
      "\"context_ms\": %.3f, \"open_ms\": %.3f, \"first_run_host_ms\": %.3f, "
      "\"first_run_done_ms\": %.3f, \"cold_open_first_launch_ms\": %.3f, "
      "\"open_again_ms\": %.3f, \"run_us\": %.3f, \"typed_us\": %.3f, "
      "\"c_abi_us\": %.3f, \"cu_launch_kernel_us\": %.3f, \"run_minus_cu_us\": %.3f, "
      "\"threads\": %d, \"run_us_per_thread_worst\": %.3f, \"iters\": %d, \"trials\": %d, "
      "\"runtime_library\": \"%s\"}",
      prop.name, (*bundle)->size(), a.kernel.c_str(), (long long)a.n, Ms(t0, t1),
      Ms(t1, t2), Ms(t3, t4), Ms(t3, t5), Ms(t1, t2) + Ms(t3, t5), Ms(t5, t6), run_us,
      typed_us, c_us, cu_us, run_us - cu_us, a.threads, threads_us, a.iters, a.trials,
      (*bundle)->runtime_library().c_str());
  std::printf("%s\n", json);
  if (!a.out.empty()) std::ofstream(a.out) << json << "\n";
  return 0;
}
