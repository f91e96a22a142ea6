// When a bundle's modules load (issue 38): lazily by default, each at its
// kernel's first Run, once, however many threads call it first; all at
// Open with BundleOptions::eager_load, $CUTECALL_BUNDLE_EAGER or the C
// ABI's CUTECALL_LOAD_EAGER. Objects are still checked before they load,
// Open loads the runtime library, and the load statistics count what
// happened. Fake runtime, no GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "bundle_fixture.h"
#include "cutecall/bundle.h"
#include "cutecall/cutecall_c.h"
#include "cutecall/runtime_table.h"
#include "fake_runtime.h"
#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::FakeRuntime;
using cutecall_test::IsError;
using cutecall_test::IsOk;

alignas(16) float g_x[8], g_y[8], g_out[8];
const int64_t kN5[] = {5}, kN6[] = {6};

Status RunSaxpy(const BundleKernel& k) {
  return k.Run(nullptr, {{g_x, kN5, 1}, {g_y, kN5, 1}}, {{g_out, kN6, 1}},
               {ScalarF32(2.0f)});
}

class BundleLoadTest : public BundleTest {
 protected:
  void TearDown() override {
    unsetenv("CUTECALL_BUNDLE_EAGER");
    BundleTest::TearDown();
  }
};

TEST_F(BundleLoadTest, OpenCreatesNoModuleAndTheFirstRunCreatesOne) {
  FakeRuntime fake;
  const BundleLoadStats before = GetBundleLoadStats();
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  EXPECT_TRUE(fake.creates.empty());
  const BundleKernel* saxpy = (*bundle)->FindOrNull("saxpy");
  const BundleKernel* mat = (*bundle)->FindOrNull("mat");
  ASSERT_NE(saxpy, nullptr);
  EXPECT_FALSE(saxpy->loaded());
  EXPECT_FALSE(mat->loaded());
  ASSERT_TRUE(IsOk(RunSaxpy(*saxpy)));
  ASSERT_TRUE(IsOk(RunSaxpy(*saxpy)));
  EXPECT_EQ(fake.creates.size(), 1u);
  ASSERT_EQ(fake.get_functions.size(), 1u);
  EXPECT_EQ(fake.get_functions[0].prefix, "cc_test");  // saxpy's, not mat's
  EXPECT_EQ(fake.runs.size(), 2u);
  EXPECT_TRUE(saxpy->loaded());
  EXPECT_FALSE(mat->loaded());

  const BundleLoadStats after = GetBundleLoadStats();
  EXPECT_EQ(after.opens - before.opens, 1);
  EXPECT_EQ(after.objects_verified - before.objects_verified, 1);
  EXPECT_EQ(after.modules_created - before.modules_created, 1);
  EXPECT_GE(after.module_create_ms, before.module_create_ms);
  EXPECT_GE(after.module_create_each_ms.size(), 1u);
}

TEST_F(BundleLoadTest, ConcurrentFirstRunsLoadOnce) {
  FakeRuntime fake;
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  const BundleKernel* saxpy = (*bundle)->FindOrNull("saxpy");
  constexpr int kThreads = 4;
  std::atomic<int> waiting{kThreads};
  std::vector<Status> results(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) std::this_thread::yield();  // start together
      results[size_t(t)] = RunSaxpy(*saxpy);
    });
  }
  for (auto& th : pool) th.join();
  for (const Status& s : results) EXPECT_TRUE(IsOk(s));
  EXPECT_EQ(fake.creates.size(), 1u);
  EXPECT_EQ(fake.runs.size(), size_t(kThreads));
}

TEST_F(BundleLoadTest, EagerLoadsEveryModuleAtOpen) {
  FakeRuntime fake;
  BundleOptions eager;
  eager.eager_load = true;
  auto bundle = Bundle::Open(dir_, eager);
  ASSERT_TRUE(IsOk(bundle));
  EXPECT_EQ(fake.creates.size(), 2u);  // one per (object, prefix)
  EXPECT_TRUE((*bundle)->kernel(0).loaded());
  EXPECT_TRUE((*bundle)->kernel(1).loaded());
  ASSERT_TRUE(IsOk(RunSaxpy(*(*bundle)->FindOrNull("saxpy"))));
  EXPECT_EQ(fake.creates.size(), 2u);
}

TEST_F(BundleLoadTest, EagerFromTheEnvironment) {
  FakeRuntime fake;
  setenv("CUTECALL_BUNDLE_EAGER", "0", 1);
  auto lazy = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(lazy));
  EXPECT_TRUE(fake.creates.empty());
  setenv("CUTECALL_BUNDLE_EAGER", "1", 1);
  auto eager = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(eager));
  EXPECT_EQ(fake.creates.size(), 2u);
  EXPECT_FALSE((*lazy)->kernel(0).loaded());
  ASSERT_TRUE(IsOk((*lazy)->kernel(0).Load()));  // the eager open's module
  EXPECT_EQ(fake.creates.size(), 2u);
}

TEST_F(BundleLoadTest, TamperedObjectIsRefusedAtItsLoadNamingTheKernel) {
  FakeRuntime fake;
  std::string bytes = TestObjectBytes();
  bytes[bytes.size() / 2] ^= 0x40;  // same size: Open's checks pass
  Write(ObjectPath(), bytes);
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  const BundleKernel* saxpy = (*bundle)->FindOrNull("saxpy");
  const std::string file = "objects/" + object_hex_ + ".o";
  EXPECT_TRUE(IsError(RunSaxpy(*saxpy), Code::kInvalidArgument,
                      {dir_, "entry 'saxpy'", file, "field 'sha256'", "tampered"}));
  EXPECT_TRUE(IsError(saxpy->Load(), Code::kInvalidArgument,  // again
                      {"entry 'saxpy'", file, "tampered"}));
  EXPECT_FALSE(saxpy->loaded());
  EXPECT_TRUE(fake.creates.empty());
  EXPECT_TRUE(fake.runs.empty());
}

TEST_F(BundleLoadTest, WrongFunctionIsRefusedAtItsLoad) {
  FakeRuntime fake;
  EditManifest("function cc_other", "function cc_nope", true);
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  EXPECT_TRUE(IsError((*bundle)->FindOrNull("mat")->Load(), Code::kNotFound,
                      {"entry 'mat'", "field 'function'", "cc_nope_version"}));
  EXPECT_TRUE(IsOk((*bundle)->FindOrNull("saxpy")->Load()));
  EXPECT_EQ(fake.creates.size(), 1u);
}

TEST_F(BundleLoadTest, MissingOrTruncatedObjectsFailAtOpen) {
  FakeRuntime fake;
  Write(ObjectPath(), TestObjectBytes().substr(0, 100));
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"entry 'mat'", "has 100 bytes", "field 'size'"}));
  fs::remove(ObjectPath());
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kNotFound,
                      {"entry 'mat'", "missing file 'objects/"}));
}

// A second open of a loaded bundle reads no object: the module is found
// by its digest (verified when it loaded).
TEST_F(BundleLoadTest, SecondOpenSharesLoadedModulesWithoutReading) {
  FakeRuntime fake;
  auto first = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(first));
  ASSERT_TRUE(IsOk((*first)->FindOrNull("saxpy")->Load()));
  const BundleLoadStats before = GetBundleLoadStats();
  auto second = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(second));
  ASSERT_TRUE(IsOk(RunSaxpy(*(*second)->FindOrNull("saxpy"))));
  const BundleLoadStats after = GetBundleLoadStats();
  EXPECT_EQ(fake.creates.size(), 1u);
  EXPECT_EQ(after.objects_verified, before.objects_verified);
  EXPECT_EQ(after.modules_shared - before.modules_shared, 1);
}

// Open loads the runtime library itself (once per process): one that
// cannot load is Open's error, not the first Run's.
TEST_F(BundleLoadTest, ARuntimeThatCannotLoadFailsOpen) {
  SetRuntimeLibraryPath(dir_ + "/no_such_runtime.so");  // no fake installed
  auto bundle = Bundle::Open(dir_);
  SetRuntimeLibraryPath("");
  EXPECT_TRUE(IsError(bundle, Code::kFailedPrecondition,
                      {dir_, "cannot load the CuTe DSL runtime", "no_such_runtime.so"}));
}

TEST_F(BundleLoadTest, InspectionCannotLoad) {
  FakeRuntime fake;
  BundleOptions inspect;
  inspect.load_modules = false;
  inspect.eager_load = true;  // no effect without load_modules
  auto bundle = Bundle::Open(dir_, inspect);
  ASSERT_TRUE(IsOk(bundle));
  EXPECT_TRUE(IsError((*bundle)->kernel(0).Load(), Code::kFailedPrecondition,
                      {"'mat'", "load_modules = false"}));
  EXPECT_TRUE(fake.creates.empty());
}

TEST_F(BundleLoadTest, CAbiLoadsLazilyEagerlyOrNot) {
  FakeRuntime fake;
  cutecall_bundle* b = nullptr;
  ASSERT_EQ(cutecall_bundle_open(dir_.c_str(), nullptr, &b), CUTECALL_OK);
  EXPECT_TRUE(fake.creates.empty());
  const cutecall_kernel* k = nullptr;
  ASSERT_EQ(cutecall_bundle_find(b, "saxpy", &k), CUTECALL_OK);
  EXPECT_EQ(cutecall_kernel_load(k), CUTECALL_OK);
  EXPECT_EQ(fake.creates.size(), 1u);
  cutecall_bundle_close(b);

  cutecall_open_options options = {CUTECALL_OPEN_OPTIONS_STRUCT_SIZE, nullptr, nullptr,
                                   CUTECALL_LOAD_EAGER, 0, 0};
  ASSERT_EQ(cutecall_bundle_open(dir_.c_str(), &options, &b), CUTECALL_OK);
  EXPECT_EQ(fake.creates.size(), 3u);  // saxpy's was destroyed with its bundle
  cutecall_bundle_close(b);

  options.load_modules = CUTECALL_LOAD_NONE;
  ASSERT_EQ(cutecall_bundle_open(dir_.c_str(), &options, &b), CUTECALL_OK);
  ASSERT_EQ(cutecall_bundle_find(b, "mat", &k), CUTECALL_OK);
  EXPECT_EQ(cutecall_kernel_load(k), CUTECALL_ERROR_FAILED_PRECONDITION);
  EXPECT_NE(std::string(cutecall_last_error()).find("load_modules = false"),
            std::string::npos);
  EXPECT_EQ(cutecall_kernel_load(nullptr), CUTECALL_ERROR_INVALID_ARGUMENT);
  cutecall_bundle_close(b);
  EXPECT_EQ(fake.creates.size(), 3u);
}

}  // namespace
}  // namespace cutecall
