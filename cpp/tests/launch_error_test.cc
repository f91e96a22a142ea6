// Launch errors that name the grid and block: ModuleRegistry::Acquire
// routes a module's launches through cutecall_launch_kex (renamed bytes,
// the shim's library), and LoadedModule::Run puts the recorded launch in
// its "failed to launch" and CUTECALL_LAUNCH_BLOCKING errors. On the fake
// runtime, whose function_run plays the compiled launcher.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "elf.h"
#include "launch_blocking.h"
#include "launch_record.h"
#include "module_registry.h"
#include "fake_runtime.h"
#include "fake_sync_driver.h"
#include "launch_config.h"
#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::FakeRuntime;
using cutecall_test::FakeSyncDriver;
using cutecall_test::IsError;
using cutecall_test::IsOk;
using cutecall_test::TestObjectBytes;

constexpr char kShimLibrary[] = "/test/lib/libcutecall_shim.so";

using cutecall_test::Config;

std::string Renamed(std::string bytes) {
  EXPECT_TRUE(IsOk(RenameUndefinedSymbol(&bytes, kLaunchImport, kLaunchShim)));
  return bytes;
}

// A fake runtime that exports _cudaLaunchKernelEx (or not), the shim's
// library known (or not), a fake driver for the blocking mode.
class LaunchErrorTest : public ::testing::Test {
 protected:
  LaunchErrorTest(bool runtime_exports_launch = true,
                           bool shim_library_known = true)
      : fake_(runtime_exports_launch),
        shim_(shim_library_known ? kShimLibrary : "") {}
  void TearDown() override {
    SetLaunchBlocking(false);
    module_.reset();
  }

  // Acquires the test object's `cc_test` function into module_.
  void Load() {
    ErrorOr<std::shared_ptr<LoadedModule>> m =
        registry_.Acquire(Sha256(object_), object_, "cc_test", "my_kernel");
    ASSERT_TRUE(IsOk(m));
    module_ = m.value();
  }

  FakeRuntime fake_;  // declared first: outlives every module of the test
  struct ShimGuard {  // the override, or none for an empty path
    explicit ShimGuard(const std::string& path)
        : guard(path.empty() ? nullptr
                             : new ScopedLaunchShimLibraryOverride(path)) {}
    std::unique_ptr<ScopedLaunchShimLibraryOverride> guard;
  } shim_;
  ModuleRegistry registry_;
  const std::string& object_ = TestObjectBytes();
  DriverTable driver_table_ = FakeSyncDriver::Table();
  ScopedDriverOverride driver_{&driver_table_};
  std::shared_ptr<LoadedModule> module_;
  void* stream_ = reinterpret_cast<void*>(0x5700);
};

class UnroutedRuntimeTest : public LaunchErrorTest {
 protected:
  UnroutedRuntimeTest() : LaunchErrorTest(false, true) {}
};

class StaticallyLinkedTest : public LaunchErrorTest {
 protected:
  StaticallyLinkedTest() : LaunchErrorTest(true, false) {}
};

// ---------------------------------------------------------------------------
// Acquire

TEST_F(LaunchErrorTest, LoadsRenamedBytesLinkedAgainstTheShimsLibrary) {
  Load();
  ASSERT_EQ(fake_.creates.size(), 1u);
  EXPECT_EQ(fake_.creates[0].bytes, Renamed(object_));
  EXPECT_EQ(fake_.creates[0].num_shared_libs, 1u);
  EXPECT_EQ(fake_.creates[0].shared_lib_paths,
            std::vector<std::string>{kShimLibrary});
  EXPECT_EQ(module_->launch_unrouted(), "");
  EXPECT_EQ(module_->key(), Sha256(object_));  // the digest of the original
}

TEST_F(LaunchErrorTest, TheShimForwardsToTheRuntimesLaunch) {
  Load();
  CudaLaunchConfig config = Config(132, 384, 197632);
  void* args[1] = {nullptr};
  const void* kernel = reinterpret_cast<const void*>(0xC0DE);
  EXPECT_EQ(cutecall_launch_kex(&config, kernel, args), 0);
  fake_.launch_error = 719;  // cudaErrorLaunchFailure
  EXPECT_EQ(cutecall_launch_kex(&config, kernel, args), 719);
  ASSERT_EQ(fake_.launches.size(), 2u);
  EXPECT_EQ(fake_.launches[0].config, &config);
  EXPECT_EQ(fake_.launches[0].kernel, kernel);
  EXPECT_EQ(fake_.launches[0].args, args);
  EXPECT_EQ(fake_.launches[0].values.block[0], 384u);
}

TEST_F(UnroutedRuntimeTest, ARuntimeWithoutLaunchKernelExGetsTheBytesAsCompiled) {
  Load();
  ASSERT_EQ(fake_.creates.size(), 1u);
  EXPECT_EQ(fake_.creates[0].bytes, object_);
  EXPECT_EQ(fake_.creates[0].shared_libs, nullptr);
  EXPECT_EQ(fake_.creates[0].num_shared_libs, 0u);
  EXPECT_EQ(module_->launch_unrouted(),
            "the CuTe DSL runtime exports no _cudaLaunchKernelEx");
}

TEST_F(StaticallyLinkedTest, WithoutTheShimsLibraryTheBytesLoadAsCompiled) {
  Load();
  ASSERT_EQ(fake_.creates.size(), 1u);
  EXPECT_EQ(fake_.creates[0].bytes, object_);
  EXPECT_EQ(fake_.creates[0].shared_libs, nullptr);
  EXPECT_NE(module_->launch_unrouted().find("linked statically"), std::string::npos)
      << module_->launch_unrouted();
}

TEST_F(LaunchErrorTest, AFailedRoutedLoadFallsBackToTheBytesAsCompiled) {
  fake_.routed_create_error = cutecall_test::kFakeErrorInvalidModule;
  Load();
  ASSERT_EQ(fake_.creates.size(), 2u);
  EXPECT_EQ(fake_.creates[0].bytes, Renamed(object_));
  EXPECT_EQ(fake_.creates[0].module, nullptr);
  EXPECT_EQ(fake_.creates[1].bytes, object_);
  EXPECT_EQ(fake_.creates[1].num_shared_libs, 0u);
  EXPECT_EQ(module_->launch_unrouted(),
            "loading the module with its launches routed through "
            "cutecall_launch_kex in '/test/lib/libcutecall_shim.so' failed: "
            "CuteDSLRT_Error_InvalidModule (the module bytes are invalid)");
}

TEST_F(LaunchErrorTest, WhenBothLoadsFailTheErrorIsTheCompiledBytesOne) {
  fake_.routed_create_error = cutecall_test::kFakeErrorFunctionMissing;
  fake_.create_error = cutecall_test::kFakeErrorInvalidModule;
  EXPECT_TRUE(IsError(
      registry_.Acquire(Sha256(object_), object_, "cc_test", "my_kernel"),
      Code::kInternal, {"kernel 'my_kernel'", "cannot load module",
                        "CuteDSLRT_Error_InvalidModule"}));
  EXPECT_EQ(fake_.creates.size(), 2u);
  EXPECT_EQ(registry_.live_modules(), 0u);
}

// ---------------------------------------------------------------------------
// Run's errors

TEST_F(LaunchErrorTest, AFaultNamesTheKernelTheStatusAndTheLaunch) {
  Load();
  SetLaunchBlocking(true);
  fake_.run_launches = {Config(1, 32, 0)};
  FakeSyncDriver::sync_result = 700;
  EXPECT_TRUE(IsError(
      module_->Run(stream_, nullptr, 0, "oob_write"), Code::kInternal,
      {"cutecall: kernel 'oob_write' failed on the GPU: "
       "CUDA_ERROR_ILLEGAL_ADDRESS (700); launch: grid (1, 1, 1), "
       "block (32, 1, 1), 0 bytes dynamic shared memory "
       "(CUTECALL_LAUNCH_BLOCKING: the stream was synchronized"}));
  EXPECT_EQ(fake_.launches.size(), 1u);  // forwarded to the runtime
  EXPECT_EQ(FakeSyncDriver::synced, std::vector<void*>{stream_});
}

TEST_F(LaunchErrorTest, AFaultAfterSeveralLaunchesNamesTheLast) {
  Load();
  SetLaunchBlocking(true);
  fake_.run_launches = {Config(4, 64, 0), Config(132, 384, 197632)};
  FakeSyncDriver::sync_result = 700;
  EXPECT_TRUE(IsError(module_->Run(stream_, nullptr, 0, "fa4"), Code::kInternal,
                      {"grid (132, 1, 1), block (384, 1, 1), 197632 bytes "
                       "dynamic shared memory, the last of 2 launches"}));
}

TEST_F(LaunchErrorTest, AFailedLaunchNamesItsGridAndBlock) {
  Load();
  fake_.launch_error = 701;  // the runtime refuses the launch
  fake_.run_launches = {Config(132, 2048, 197632)};
  EXPECT_TRUE(IsError(
      module_->Run(stream_, nullptr, 0, "big_block"), Code::kInternal,
      {"cutecall: kernel 'big_block' failed to launch: "
       "cudaErrorLaunchOutOfResources (701); launch: grid (132, 1, 1), "
       "block (2048, 1, 1), 197632 bytes dynamic shared memory"}));
}

TEST_F(LaunchErrorTest, EachRunStartsAFreshRecord) {
  Load();
  fake_.run_launches = {Config(8, 256, 0)};
  ASSERT_TRUE(IsOk(module_->Run(stream_, nullptr, 0, "k")));
  fake_.run_launches.clear();
  fake_.run_cuda_status = 98;  // a failure before the launch call
  EXPECT_TRUE(IsError(module_->Run(stream_, nullptr, 0, "k"), Code::kInternal,
                      {"failed to launch: cudaErrorInvalidDeviceFunction (98); "
                       "launch: grid and block unknown (this call made no "
                       "launch)"}));
}

TEST_F(UnroutedRuntimeTest, AFaultSaysWhyTheGridAndBlockAreUnknown) {
  Load();
  SetLaunchBlocking(true);
  fake_.run_launches = {Config(1, 32, 0)};  // straight to the runtime
  FakeSyncDriver::sync_result = 700;
  EXPECT_TRUE(IsError(
      module_->Run(stream_, nullptr, 0, "oob_write"), Code::kInternal,
      {"kernel 'oob_write' failed on the GPU: CUDA_ERROR_ILLEGAL_ADDRESS (700); "
       "launch: grid and block unknown (the CuTe DSL runtime exports no "
       "_cudaLaunchKernelEx) (CUTECALL_LAUNCH_BLOCKING"}));
}

TEST_F(LaunchErrorTest, ACleanRunWithBlockingOnIsOk) {
  Load();
  SetLaunchBlocking(true);
  fake_.run_launches = {Config(1, 32, 0)};
  EXPECT_TRUE(IsOk(module_->Run(stream_, nullptr, 0, "k")));
  EXPECT_EQ(CurrentLaunchRecord().launches, 1u);
  EXPECT_EQ(CurrentLaunchRecord().block[0], 32u);
}

}  // namespace
}  // namespace cutecall
