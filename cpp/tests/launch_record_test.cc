// The launch shim cutecall_launch_kex, its per-thread record and text, and
// the route of a module through it (launch_record.h).
#include "launch_record.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "elf.h"
#include "launch_blocking.h"
#include "elf_builder.h"
#include "launch_config.h"
#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::IsError;
using cutecall_test::IsOk;
using cutecall_test::TestObjectBytes;

// A forward target that records its calls and returns `result`.
struct FakeForward {
  struct Call {
    const CudaLaunchConfig* config;
    const void* kernel;
    void** args;
  };
  static inline std::vector<Call> calls;
  static inline int result = 0;
  static int Launch(const CudaLaunchConfig* config, const void* kernel,
                    void** args) {
    calls.push_back({config, kernel, args});
    return result;
  }
};

using cutecall_test::Config;

class LaunchRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeForward::calls.clear();
    FakeForward::result = 0;
    previous_ = SetLaunchForward(&FakeForward::Launch);
    ResetLaunchRecord();
  }
  void TearDown() override { SetLaunchForward(previous_); }

  LaunchKernelExFn previous_ = nullptr;
  const void* kernel_ = reinterpret_cast<const void*>(0xC0DE);
  void* arg_storage_[2] = {nullptr, nullptr};
  void** args_ = arg_storage_;
};

TEST_F(LaunchRecordTest, ShimRecordsTheLaunchAndForwardsItUnchanged) {
  CudaLaunchConfig config = Config(132, 384, 197632);
  config.grid[1] = 2;
  config.block[2] = 3;
  config.stream = reinterpret_cast<void*>(0x5700);
  EXPECT_EQ(cutecall_launch_kex(&config, kernel_, args_), 0);

  ASSERT_EQ(FakeForward::calls.size(), 1u);
  EXPECT_EQ(FakeForward::calls[0].config, &config);
  EXPECT_EQ(FakeForward::calls[0].kernel, kernel_);
  EXPECT_EQ(FakeForward::calls[0].args, args_);
  LaunchRecord r = CurrentLaunchRecord();
  EXPECT_EQ(r.launches, 1u);
  EXPECT_EQ(r.grid[0], 132u);
  EXPECT_EQ(r.grid[1], 2u);
  EXPECT_EQ(r.grid[2], 1u);
  EXPECT_EQ(r.block[0], 384u);
  EXPECT_EQ(r.block[1], 1u);
  EXPECT_EQ(r.block[2], 3u);
  EXPECT_EQ(r.dynamic_smem_bytes, 197632u);
  EXPECT_EQ(r.last_result, 0);
  EXPECT_EQ(DescribeLaunch(r),
            "grid (132, 2, 1), block (384, 1, 3), 197632 bytes dynamic "
            "shared memory");
}

TEST_F(LaunchRecordTest, ShimReturnsAndRecordsTheForwardsError) {
  FakeForward::result = 701;  // cudaErrorLaunchOutOfResources
  CudaLaunchConfig config = Config(1, 2048, 0);
  EXPECT_EQ(cutecall_launch_kex(&config, kernel_, args_), 701);
  EXPECT_EQ(CurrentLaunchRecord().last_result, 701);
  EXPECT_EQ(CurrentLaunchRecord().block[0], 2048u);
}

TEST_F(LaunchRecordTest, CountsLaunchesSinceTheLastReset) {
  for (uint32_t x : {4u, 8u, 16u}) {
    CudaLaunchConfig config = Config(x, 128, 1024);
    ASSERT_EQ(cutecall_launch_kex(&config, kernel_, args_), 0);
  }
  LaunchRecord r = CurrentLaunchRecord();
  EXPECT_EQ(r.launches, 3u);
  EXPECT_EQ(DescribeLaunch(r),
            "grid (16, 1, 1), block (128, 1, 1), 1024 bytes dynamic shared "
            "memory, the last of 3 launches");
  ResetLaunchRecord();
  EXPECT_EQ(CurrentLaunchRecord().launches, 0u);
  EXPECT_EQ(CurrentLaunchRecord().grid[0], 0u);
  EXPECT_EQ(DescribeLaunch(CurrentLaunchRecord()),
            "grid and block unknown (this call made no launch)");
}

TEST_F(LaunchRecordTest, WithoutAForwardTargetTheShimReturnsCudaErrorUnknown) {
  SetLaunchForward(nullptr);
  CudaLaunchConfig config = Config(1, 32, 0);
  EXPECT_EQ(cutecall_launch_kex(&config, kernel_, args_), 999);
  EXPECT_EQ(CurrentLaunchRecord().launches, 1u);
  EXPECT_EQ(CurrentLaunchRecord().last_result, 999);
  EXPECT_TRUE(FakeForward::calls.empty());
}

TEST_F(LaunchRecordTest, ANullConfigIsForwardedWithNoDimensions) {
  FakeForward::result = 1;  // what cudart answers: cudaErrorInvalidValue
  EXPECT_EQ(cutecall_launch_kex(nullptr, kernel_, args_), 1);
  ASSERT_EQ(FakeForward::calls.size(), 1u);
  EXPECT_EQ(FakeForward::calls[0].config, nullptr);
  EXPECT_EQ(CurrentLaunchRecord().launches, 1u);
  EXPECT_EQ(CurrentLaunchRecord().grid[0], 0u);
}

TEST_F(LaunchRecordTest, EachThreadHasItsOwnRecord) {
  CudaLaunchConfig mine = Config(7, 64, 0);
  ASSERT_EQ(cutecall_launch_kex(&mine, kernel_, args_), 0);
  LaunchRecord other;
  std::thread t([&] {
    CudaLaunchConfig theirs = Config(9, 256, 512);
    cutecall_launch_kex(&theirs, kernel_, args_);
    cutecall_launch_kex(&theirs, kernel_, args_);
    other = CurrentLaunchRecord();
  });
  t.join();
  EXPECT_EQ(other.launches, 2u);
  EXPECT_EQ(other.grid[0], 9u);
  EXPECT_EQ(CurrentLaunchRecord().launches, 1u);
  EXPECT_EQ(CurrentLaunchRecord().grid[0], 7u);
}

TEST_F(LaunchRecordTest, SetLaunchForwardReturnsThePreviousTarget) {
  EXPECT_EQ(SetLaunchForward(nullptr), &FakeForward::Launch);
  EXPECT_EQ(SetLaunchForward(&FakeForward::Launch), nullptr);
}

// ---------------------------------------------------------------------------
// cutecall_launch_drv: the driver's cuLaunchKernelEx, the runtime behind it

// A driver launch that keeps a copy of what it was given and returns `result`.
struct FakeDriver {
  static inline std::vector<DriverLaunchConfig> configs;
  static inline std::vector<const void*> kernels;
  static inline std::vector<void**> params;
  static inline int result = 0;
  static int Launch(const DriverLaunchConfig* c, const void* f, void** p,
                    void** extra) {
    configs.push_back(*c);
    kernels.push_back(f);
    params.push_back(p);
    return extra == nullptr ? result : -1;
  }
};

class DriverShimTest : public LaunchRecordTest {
 protected:
  void SetUp() override {
    LaunchRecordTest::SetUp();
    FakeDriver::configs.clear();
    FakeDriver::kernels.clear();
    FakeDriver::params.clear();
    FakeDriver::result = 0;
    previous_driver_ = SetLaunchDriver(&FakeDriver::Launch);
  }
  void TearDown() override {
    SetLaunchDriver(previous_driver_);
    LaunchRecordTest::TearDown();
  }
  DriverLaunchKernelExFn previous_driver_ = nullptr;
};

TEST_F(DriverShimTest, TheDriverLaunchesWhatTheModuleAskedAndTheRuntimeNothing) {
  CudaLaunchConfig config = Config(132, 384, 197632);
  config.grid[2] = 4;
  config.stream = reinterpret_cast<void*>(0x5700);
  int attrs[4] = {};
  config.attrs = attrs;
  config.num_attrs = 2;
  EXPECT_EQ(cutecall_launch_drv(&config, kernel_, args_), 0);

  EXPECT_TRUE(FakeForward::calls.empty());
  ASSERT_EQ(FakeDriver::configs.size(), 1u);
  const DriverLaunchConfig& c = FakeDriver::configs[0];
  EXPECT_EQ(c.grid[0], 132u);
  EXPECT_EQ(c.grid[1], 1u);
  EXPECT_EQ(c.grid[2], 4u);
  EXPECT_EQ(c.block[0], 384u);
  EXPECT_EQ(c.shared_mem_bytes, 197632u);
  EXPECT_EQ(c.stream, config.stream);
  EXPECT_EQ(c.attrs, static_cast<void*>(attrs));  // passed as they are
  EXPECT_EQ(c.num_attrs, 2u);
  EXPECT_EQ(FakeDriver::kernels[0], kernel_);
  EXPECT_EQ(FakeDriver::params[0], args_);
  LaunchRecord r = CurrentLaunchRecord();
  EXPECT_EQ(r.launches, 1u);
  EXPECT_EQ(r.grid[0], 132u);
  EXPECT_EQ(r.last_result, 0);
}

TEST_F(DriverShimTest, ALaunchTheDriverRefusesGoesToTheRuntime) {
  FakeDriver::result = 1;        // CUDA_ERROR_INVALID_VALUE
  FakeForward::result = 701;     // the runtime's own code for it
  CudaLaunchConfig config = Config(1, 2048, 0);
  EXPECT_EQ(cutecall_launch_drv(&config, kernel_, args_), 701);
  EXPECT_EQ(FakeDriver::configs.size(), 1u);
  ASSERT_EQ(FakeForward::calls.size(), 1u);
  EXPECT_EQ(FakeForward::calls[0].config, &config);
  EXPECT_EQ(CurrentLaunchRecord().launches, 1u);  // one launch, recorded once
  EXPECT_EQ(CurrentLaunchRecord().last_result, 701);
}

TEST_F(DriverShimTest, WithoutADriverOrAConfigTheRuntimeLaunches) {
  CudaLaunchConfig config = Config(3, 64, 0);
  EXPECT_EQ(cutecall_launch_drv(nullptr, kernel_, args_), 0);
  SetLaunchDriver(nullptr);
  EXPECT_EQ(cutecall_launch_drv(&config, kernel_, args_), 0);
  EXPECT_TRUE(FakeDriver::configs.empty());
  EXPECT_EQ(FakeForward::calls.size(), 2u);
}

TEST_F(DriverShimTest, SharedMemoryPast32BitsGoesToTheRuntime) {
  CudaLaunchConfig config = Config(1, 32, size_t(1) << 33);
  EXPECT_EQ(cutecall_launch_drv(&config, kernel_, args_), 0);
  EXPECT_TRUE(FakeDriver::configs.empty());
  EXPECT_EQ(FakeForward::calls.size(), 1u);
}

TEST(LaunchShimTest, TheShimNamesAreAsLongAsTheImport) {
  EXPECT_EQ(kLaunchImport, "_cudaLaunchKernelEx");
  EXPECT_EQ(kLaunchShim, "cutecall_launch_kex");
  EXPECT_EQ(kLaunchDriverShim, "cutecall_launch_drv");
  EXPECT_EQ(kLaunchShim.size(), kLaunchImport.size());
  EXPECT_EQ(kLaunchDriverShim.size(), kLaunchImport.size());
}

// ---------------------------------------------------------------------------
// LaunchShimLibrary

TEST(LaunchShimLibraryTest, InAStaticallyLinkedExecutableIsNotFound) {
  // This test executable links cutecall_core statically.
  EXPECT_TRUE(IsError(LaunchShimLibrary(), Code::kNotFound,
                      {"cutecall_launch_kex is in the executable",
                       "cutecall is linked statically"}));
}

TEST(LaunchShimLibraryTest, AnOverrideAnswersAndNests) {
  {
    ScopedLaunchShimLibraryOverride outer("/opt/a/libouter.so");
    EXPECT_EQ(LaunchShimLibrary().value(), "/opt/a/libouter.so");
    {
      ScopedLaunchShimLibraryOverride inner("/opt/b/libinner.so");
      EXPECT_EQ(LaunchShimLibrary().value(), "/opt/b/libinner.so");
    }
    EXPECT_EQ(LaunchShimLibrary().value(), "/opt/a/libouter.so");
  }
  EXPECT_FALSE(LaunchShimLibrary().ok());
}

// shim_library_lib.cc links cutecall_core into a shared library, as the
// Python extension does: there the shim's library is that library.
TEST(LaunchShimLibraryTest, InASharedLibraryIsThatLibrary) {
  void* lib = dlopen(CUTECALL_TEST_SHIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Fn = const char* (*)();
  auto answer = reinterpret_cast<Fn>(
      dlsym(lib, "cutecall_test_launch_shim_library"));
  ASSERT_NE(answer, nullptr);
  EXPECT_STREQ(answer(), CUTECALL_TEST_SHIM_LIBRARY);
  // The library exports the shim by its C name, for the runtime's JIT.
  EXPECT_NE(dlsym(lib, "cutecall_launch_kex"), nullptr);
  EXPECT_NE(dlsym(lib, "cutecall_launch_drv"), nullptr);
  // Left loaded: its static state lives to exit, as in a real process.
}

// ---------------------------------------------------------------------------
// RouteLaunches

int UnusedLaunch(const CudaLaunchConfig*, const void*, void**) { return 0; }

RuntimeTable WithLaunch() {
  RuntimeTable rt;
  rt.launch_kernel_ex = &UnusedLaunch;
  return rt;
}

TEST(RouteLaunchesTest, ARuntimeWithoutLaunchKernelExIsNotRouted) {
  ScopedLaunchShimLibraryOverride shim("/opt/libshim.so");
  LaunchRoute route = RouteLaunches(TestObjectBytes(), RuntimeTable{});
  EXPECT_FALSE(route.routed());
  EXPECT_EQ(route.why_not, "the CuTe DSL runtime exports no _cudaLaunchKernelEx");
  EXPECT_TRUE(route.bytes.empty());
  EXPECT_TRUE(route.library.empty());
}

TEST(RouteLaunchesTest, AStaticallyLinkedExecutableIsNotRouted) {
  LaunchRoute route = RouteLaunches(TestObjectBytes(), WithLaunch());
  EXPECT_FALSE(route.routed());
  EXPECT_NE(route.why_not.find("cutecall is linked statically"), std::string::npos)
      << route.why_not;
}

TEST(RouteLaunchesTest, WithTheShimsLibraryTheImportIsRenamed) {
  ScopedLaunchShimLibraryOverride shim("/opt/libshim.so");
  LaunchRoute route = RouteLaunches(TestObjectBytes(), WithLaunch());
  ASSERT_TRUE(route.routed()) << route.why_not;
  EXPECT_EQ(route.library, "/opt/libshim.so");
  std::string expected = TestObjectBytes();
  ASSERT_TRUE(IsOk(RenameUndefinedSymbol(&expected, kLaunchImport, kLaunchShim)));
  EXPECT_EQ(route.bytes, expected);
  EXPECT_NE(route.bytes, TestObjectBytes());
}

TEST(RouteLaunchesTest, TheSwitchRoutesAlwaysNeverOrWhileBlockingIsOn) {
  ScopedLaunchShimLibraryOverride shim("/opt/libshim.so");
  auto route = [](const char* setting, bool blocking) {
    if (setting != nullptr) {
      setenv("CUTECALL_LAUNCH_RECORD", setting, 1);
    } else {
      unsetenv("CUTECALL_LAUNCH_RECORD");
    }
    SetLaunchBlocking(blocking);
    LaunchRoute r = RouteLaunches(TestObjectBytes(), WithLaunch());
    SetLaunchBlocking(false);
    setenv("CUTECALL_LAUNCH_RECORD", "1", 1);  // as route_launches_always.cc
    return r;
  };
  LaunchRoute off = route("0", true);
  EXPECT_FALSE(off.routed());
  EXPECT_EQ(off.why_not, "CUTECALL_LAUNCH_RECORD=0");
  EXPECT_TRUE(route("1", false).routed());
  LaunchRoute unset_off = route(nullptr, false);
  EXPECT_FALSE(unset_off.routed());
  EXPECT_NE(unset_off.why_not.find("loaded while CUTECALL_LAUNCH_BLOCKING was off"),
            std::string::npos) << unset_off.why_not;
  EXPECT_TRUE(route(nullptr, true).routed());
}

// A module that launches library kernels: it imports _cudaLaunchKernelEx
// and _cudaLibraryGetKernel, as the CuTe DSL's host code does.
std::string LibraryKernelModule() {
  cutecall_test::ElfObjectSpec spec;
  spec.symbols = {{spec.strings.Add("_cudaLaunchKernelEx"), 0},
                  {spec.strings.Add("_cudaLibraryGetKernel"), 0},
                  {spec.strings.Add("cc_test_version"), cutecall_test::kTextSection}};
  return cutecall_test::BuildElfObject(spec);
}

// RouteLaunches under CUTECALL_LAUNCH_RECORD / _DRIVER settings (null:
// unset), launch blocking off; the settings restored as the suite runs them.
LaunchRoute RouteWith(const std::string& module, bool driver, const char* record,
                      const char* to_driver) {
  auto set = [](const char* name, const char* v) {
    if (v != nullptr) {
      setenv(name, v, 1);
    } else {
      unsetenv(name);
    }
  };
  set("CUTECALL_LAUNCH_RECORD", record);
  set("CUTECALL_LAUNCH_DRIVER", to_driver);
  LaunchRoute r = RouteLaunches(module, WithLaunch(), driver);
  setenv("CUTECALL_LAUNCH_RECORD", "1", 1);  // as route_launches_always.cc
  unsetenv("CUTECALL_LAUNCH_DRIVER");
  return r;
}

TEST(RouteLaunchesTest, LibraryKernelsGoToTheDriverByDefault) {
  ScopedLaunchShimLibraryOverride shim("/opt/libshim.so");
  LaunchRoute route = RouteWith(LibraryKernelModule(), true, nullptr, nullptr);
  ASSERT_TRUE(route.routed()) << route.why_not;
  EXPECT_EQ(route.shim, kLaunchDriverShim);
  std::string expected = LibraryKernelModule();
  ASSERT_TRUE(IsOk(RenameUndefinedSymbol(&expected, kLaunchImport, kLaunchDriverShim)));
  EXPECT_EQ(route.bytes, expected);
  // With the record asked for, too: the driver shim records as well.
  EXPECT_EQ(RouteWith(LibraryKernelModule(), true, "1", nullptr).shim, kLaunchDriverShim);
}

TEST(RouteLaunchesTest, TheDriverRouteIsTakenOnlyWhereItApplies) {
  ScopedLaunchShimLibraryOverride shim("/opt/libshim.so");
  // No driver launch at hand, or CUTECALL_LAUNCH_DRIVER=0: the record's route.
  EXPECT_FALSE(RouteWith(LibraryKernelModule(), false, nullptr, nullptr).routed());
  EXPECT_FALSE(RouteWith(LibraryKernelModule(), true, nullptr, "0").routed());
  EXPECT_EQ(RouteWith(LibraryKernelModule(), true, "1", "0").shim, kLaunchShim);
  // CUTECALL_LAUNCH_RECORD=0: the runtime's own path, whatever else.
  LaunchRoute off = RouteWith(LibraryKernelModule(), true, "0", nullptr);
  EXPECT_FALSE(off.routed());
  EXPECT_EQ(off.why_not, "CUTECALL_LAUNCH_RECORD=0");
  // A module whose kernels are not library kernels (no _cudaLibraryGetKernel).
  EXPECT_FALSE(RouteWith(TestObjectBytes(), true, nullptr, nullptr).routed());
  EXPECT_EQ(RouteWith(TestObjectBytes(), true, "1", nullptr).shim, kLaunchShim);
}

TEST(RouteLaunchesTest, AModuleWithoutTheImportIsNotRouted) {
  ScopedLaunchShimLibraryOverride shim("/opt/libshim.so");
  cutecall_test::ElfObjectSpec spec;
  spec.symbols = {{spec.strings.Add("cc_test_version"), cutecall_test::kTextSection}};
  LaunchRoute route = RouteLaunches(cutecall_test::BuildElfObject(spec), WithLaunch());
  EXPECT_EQ(route.why_not, "the module imports no _cudaLaunchKernelEx");
}

TEST(RouteLaunchesTest, AnUnrenamableImportIsNotRouted) {
  ScopedLaunchShimLibraryOverride shim("/opt/libshim.so");
  cutecall_test::ElfObjectSpec spec;
  uint32_t name = spec.strings.Add("_cudaLaunchKernelEx");
  spec.symbols = {{name, 0}, {name + 5, cutecall_test::kTextSection}};
  LaunchRoute route = RouteLaunches(cutecall_test::BuildElfObject(spec), WithLaunch());
  EXPECT_NE(route.why_not.find("string tail merging"), std::string::npos)
      << route.why_not;
}

}  // namespace
}  // namespace cutecall
