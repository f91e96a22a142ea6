// cpp_bundle_bench — what bundles cost the host from C++, in one
// fresh process: the cold path (CUDA context, Bundle::Open, the first
// launch, the other kernels' loads, a second Open of the same bundle) split
// by GetBundleLoadStats into manifest checks, runtime choice, the runtime's
// dlopen, object checks and each module create; then per-launch host time
// of BundleKernel::Run, the generated typed function, the C ABI, the DSL
// launcher called directly and a bare cuLaunchKernel of an empty kernel
// with vector_add's parameters, and Run from several threads at once.
// Prints one JSON line of results (a second with the DSL floor).
//
//   cpp_bundle_bench BUNDLE [--eager] [--cold-only] [--no-dsl-floor]
//                    [--kernel vector_add] [--n 4096] [--iters 20000]
//                    [--trials 5] [--threads 4] [--dry-run]
// --eager opens with BundleOptions::eager_load (default: lazy); --dry-run
// (no GPU) opens the bundle lazily and prints the open's split only.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cutecall/bundle.h"
#include "cutecall/cutecall_c.h"
#include "dsl_floor.h"
#include "json_line.h"
#include "kernels.h"
#include "timing.h"

extern "C" CUfunction BareKernel();

namespace {

using bench::BestUs;
using bench::Clock;
using bench::Ms;

struct Args {
  std::string bundle, kernel = "vector_add";
  int64_t n = 4096;
  int iters = 20000, trials = 5, threads = 4;
  bool eager = false, cold_only = false, dsl_floor = true, dry_run = false;
};

int Die(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (s == "--kernel") a->kernel = next();
    else if (s == "--n") a->n = std::atoll(next().c_str());
    else if (s == "--iters") a->iters = std::atoi(next().c_str());
    else if (s == "--trials") a->trials = std::atoi(next().c_str());
    else if (s == "--threads") a->threads = std::atoi(next().c_str());
    else if (s == "--eager") a->eager = true;
    else if (s == "--cold-only") a->cold_only = true;
    else if (s == "--no-dsl-floor") a->dsl_floor = false;
    else if (s == "--dry-run") a->dry_run = true;
    else if (s.rfind("--", 0) == 0) return false;
    else a->bundle = s;
  }
  return !a->bundle.empty();
}

// The load split so far: where the cold time went.
void AddSplit(bench::JsonLine& j, const cutecall::BundleLoadStats& s) {
  j.Num("manifest_ms", s.manifest_ms);
  j.Num("runtime_choose_ms", s.runtime_choose_ms);
  j.Num("runtime_dlopen_ms", s.runtime_dlopen_ms);
  j.Int("objects_verified", s.objects_verified);
  j.Num("object_verify_ms", s.object_verify_ms);
  j.Int("modules_created", s.modules_created);
  j.Num("module_create_ms", s.module_create_ms);
  j.Num("first_module_create_ms",
        s.module_create_each_ms.empty() ? 0.0 : s.module_create_each_ms[0]);
}

// vector_add's operands: x + y -> z, n floats each, and a stream.
struct Buffers {
  float *x = nullptr, *y = nullptr, *z = nullptr;
  cudaStream_t stream = nullptr;
  int64_t dims[1] = {0};
  cutecall::BufferView in[2], out[1];
  bool Allocate(int64_t n) {
    const size_t bytes = size_t(n) * sizeof(float);
    dims[0] = n;
    if (cudaMalloc(&x, bytes) || cudaMalloc(&y, bytes) || cudaMalloc(&z, bytes) ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) {
      return false;
    }
    in[0] = {x, dims, 1};
    in[1] = {y, dims, 1};
    out[0] = {z, dims, 1};
    return true;
  }
  cutecall::Status Run(const cutecall::BundleKernel& k) const {
    return k.Run(stream, {in, 2}, {out, 1});
  }
};

// No GPU: the lazy open's split only (run.py --dry-run).
int DryRun(const Args& a, const cutecall::BundleOptions& options, bench::JsonLine& j) {
  auto t = Clock::now();
  auto bundle = cutecall::Bundle::Open(a.bundle, options);
  if (!bundle.ok()) return Die(bundle.status().ToString());
  j.Num("open_ms", Ms(t, Clock::now()));
  j.Int("bundle_kernels", int64_t((*bundle)->size()));
  j.Str("runtime_library", (*bundle)->runtime_library());
  AddSplit(j, cutecall::GetBundleLoadStats());
  std::printf("%s\n", j.Done().c_str());
  return 0;
}

// The cold path, timed: context, Open, first launch, the other kernels'
// loads, a second Open and its first launch. Fills `j`; 0 or 1 (failed).
int Cold(const Args& a, const cutecall::BundleOptions& options, Buffers& b,
         std::unique_ptr<cutecall::Bundle>* out, bench::JsonLine& j) {
  auto t0 = Clock::now();
  cudaSetDevice(0);
  cudaFree(nullptr);  // the context: a process has it before it opens bundles
  auto t1 = Clock::now();
  auto bundle = cutecall::Bundle::Open(a.bundle, options);
  auto t2 = Clock::now();
  if (!bundle.ok()) return Die(bundle.status().ToString());
  const cutecall::BundleKernel* k = (*bundle)->FindOrNull(a.kernel);
  if (k == nullptr) return Die("no kernel " + a.kernel);
  if (!b.Allocate(a.n)) return Die("CUDA allocation");
  auto t3 = Clock::now();
  const cutecall::Status first = b.Run(*k);
  auto t4 = Clock::now();
  cudaStreamSynchronize(b.stream);
  auto t5 = Clock::now();
  if (!first.ok()) return Die(first.ToString());
  const cutecall::BundleLoadStats at_first = cutecall::GetBundleLoadStats();
  for (size_t i = 0; i < (*bundle)->size(); ++i) {  // lazy: the other kernels
    if (cutecall::Status s = (*bundle)->kernel(i).Load(); !s.ok()) return Die(s.ToString());
  }
  auto t6 = Clock::now();
  auto again = cutecall::Bundle::Open(a.bundle, options);
  auto t7 = Clock::now();
  if (!again.ok()) return Die(again.status().ToString());
  const cutecall::Status again_run = b.Run(*(*again)->FindOrNull(a.kernel));
  auto t8 = Clock::now();
  if (!again_run.ok()) return Die(again_run.ToString());
  const cutecall::BundleLoadStats all = cutecall::GetBundleLoadStats();

  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  j.Str("device", prop.name);
  j.Int("bundle_kernels", int64_t((*bundle)->size()));
  j.Str("kernel", a.kernel);
  j.Int("n", a.n);
  j.Num("context_ms", Ms(t0, t1));
  j.Num("open_ms", Ms(t1, t2));
  j.Num("first_run_host_ms", Ms(t3, t4));
  j.Num("first_run_done_ms", Ms(t3, t5));
  j.Num("cold_open_first_launch_ms", Ms(t1, t2) + Ms(t3, t5));
  AddSplit(j, at_first);  // the split of open + first launch
  j.Num("load_rest_ms", Ms(t5, t6));
  j.Num("open_again_ms", Ms(t6, t7));
  j.Num("open_again_first_run_ms", Ms(t7, t8));
  j.List("module_create_each_ms", all.module_create_each_ms);
  j.Int("modules_shared", all.modules_shared);
  j.Str("runtime_library", (*bundle)->runtime_library());
  *out = std::move(bundle).value();
  return 0;
}

// Per-launch host time of each way to launch, then Run from many threads.
int Hot(const Args& a, const cutecall::Bundle& bundle, const cutecall::BundleKernel& k,
        const Buffers& b, bench::JsonLine& j) {
  cudaStream_t stream = b.stream;
  auto run = [&] { (void)b.Run(k); };
  cutecall::TensorRef<float, 1> tx(b.x, {a.n}), ty(b.y, {a.n}), tz(b.z, {a.n});
  auto typed = [&] { (void)kernels::vector_add(bundle, tx, ty, tz, stream); };
  cutecall_bundle* cb = nullptr;
  const cutecall_kernel* ck = nullptr;
  if (cutecall_bundle_open(a.bundle.c_str(), nullptr, &cb) != CUTECALL_OK ||
      cutecall_bundle_find(cb, a.kernel.c_str(), &ck) != CUTECALL_OK) {
    return Die(cutecall_last_error());
  }
  const cutecall_tensor cin[] = {{b.x, b.dims, 1, nullptr}, {b.y, b.dims, 1, nullptr}};
  const cutecall_tensor cout_[] = {{b.z, b.dims, 1, nullptr}};
  auto c_abi = [&] { (void)cutecall_kernel_run(ck, stream, cin, 2, cout_, 1, nullptr, 0); };
  CUfunction bare = BareKernel();
  float *x = b.x, *y = b.y, *z = b.z;
  int n32 = int(a.n);
  void* params[] = {&x, &y, &z, &n32};
  const unsigned grid = unsigned((a.n + 255) / 256);
  auto cu = [&] { cuLaunchKernel(bare, grid, 1, 1, 256, 1, 1, 0, stream, params, nullptr); };

  const double run_us = BestUs(run, stream, a.iters, a.trials);
  j.Num("run_us", run_us);
  j.Num("typed_us", BestUs(typed, stream, a.iters, a.trials));
  j.Num("c_abi_us", BestUs(c_abi, stream, a.iters, a.trials));
  const double cu_us = BestUs(cu, stream, a.iters, a.trials);
  j.Num("cu_launch_kernel_us", cu_us);
  j.Num("run_minus_cu_us", run_us - cu_us);

  std::vector<double> per_thread(size_t(a.threads));  // each its own stream
  std::vector<std::thread> pool;
  for (int t = 0; t < a.threads; ++t) {
    pool.emplace_back([&, t] {
      Buffers mine = b;
      cudaStreamCreateWithFlags(&mine.stream, cudaStreamNonBlocking);
      per_thread[size_t(t)] = BestUs([&] { (void)mine.Run(k); }, mine.stream, a.iters, a.trials);
      cudaStreamDestroy(mine.stream);
    });
  }
  for (auto& th : pool) th.join();
  double worst = 0;
  for (double v : per_thread) worst = std::max(worst, v);
  j.Int("threads", a.threads);
  j.Num("run_us_per_thread_worst", worst);
  j.Int("iters", a.iters);
  j.Int("trials", a.trials);
  const cudaError_t err = cudaDeviceSynchronize();
  cutecall_bundle_close(cb);
  if (err != cudaSuccess) return Die(cudaGetErrorString(err));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) return Die("usage: cpp_bundle_bench BUNDLE [options]");
  cutecall::BundleOptions options;
  options.eager_load = a.eager;
  bench::JsonLine j;
  j.Str("mode", a.eager ? "eager" : "lazy");
  if (a.dry_run) return DryRun(a, options, j);
  Buffers b;
  std::unique_ptr<cutecall::Bundle> bundle;
  if (Cold(a, options, b, &bundle, j) != 0) return 1;
  const cutecall::BundleKernel& k = *bundle->FindOrNull(a.kernel);
  if (!a.cold_only && Hot(a, *bundle, k, b, j) != 0) return 1;
  std::printf("%s\n", j.Done().c_str());
  std::fflush(stdout);
  if (a.cold_only || !a.dsl_floor) return 0;
  // Last, on its own line: it loads a second module of the same object.
  std::string why;
  const double floor_us = bench::DslFloorUs(a.bundle, k, b.stream, {b.in, 2}, {b.out, 1},
                                            a.iters, a.trials, &why);
  bench::JsonLine f;
  if (floor_us < 0) {
    f.Str("dsl_floor_error", why);
  } else {
    f.Num("dsl_function_run_us", floor_us);
  }
  std::printf("%s\n", f.Done().c_str());
  return 0;
}
