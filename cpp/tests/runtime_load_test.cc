// Loading a real shared library as the CuTe DSL runtime. A load is permanent
// for the process, so these tests have their own executable. The library is
// fake_dsl_runtime_lib.cc, which exports the six CuteDSLRT_* symbols and
// _cudaLaunchKernelEx.
//
// Under ctest every test runs in a fresh process; run directly, the tests run
// in file order in one process, and only the first expects nothing loaded.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "launch_record.h"
#include "module_registry.h"
#include "cutecall/runtime_table.h"
#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::IsError;
using cutecall_test::IsOk;

const std::string kFakeLibrary = CUTECALL_TEST_FAKE_RUNTIME;

const RuntimeTable* LoadFakeLibrary() {
  unsetenv("CUTECALL_DSL_RUNTIME");
  SetRuntimeLibraryPath(kFakeLibrary);
  ErrorOr<const RuntimeTable*> rt = Runtime();
  EXPECT_TRUE(IsOk(rt));
  return rt.ok() ? rt.value() : nullptr;
}

TEST(RuntimeLoadTest, FailedLoadIsNotCachedAndACorrectedPathLoads) {
  ASSERT_FALSE(RuntimeLoaded());
  unsetenv("CUTECALL_DSL_RUNTIME");
  SetRuntimeLibraryPath("/nonexistent/libcute_dsl_runtime.so");
  EXPECT_TRUE(IsError(Runtime(), Code::kFailedPrecondition,
                      {"/nonexistent/libcute_dsl_runtime.so"}));
  EXPECT_FALSE(RuntimeLoaded());

  SetRuntimeLibraryPath(kFakeLibrary);
  ErrorOr<const RuntimeTable*> rt = Runtime();
  ASSERT_TRUE(IsOk(rt));
  EXPECT_TRUE(RuntimeLoaded());
  EXPECT_EQ(RuntimeLibraryPath(), kFakeLibrary);
}

TEST(RuntimeLoadTest, EveryEntryResolvesToItsExportedFunction) {
  const RuntimeTable* rt = LoadFakeLibrary();
  ASSERT_NE(rt, nullptr);
  // Each entry behaves as its CuteDSLRT_* function does in the fake library.
  EXPECT_EQ(RuntimeErrorText(*rt, 9),
            "CuteDSLRT_Error_FakeLibrary (fake library description)");
  const unsigned char bytes[] = {1, 2, 3};
  void* module = nullptr;
  ASSERT_EQ(rt->module_create_from_bytes(&module, bytes, sizeof(bytes), nullptr, 0), 0);
  ASSERT_NE(module, nullptr);
  void* function = nullptr;
  EXPECT_EQ(rt->module_get_function(&function, module, "other"), 2);
  ASSERT_EQ(rt->module_get_function(&function, module, "cc_test"), 0);
  ASSERT_NE(function, nullptr);
  EXPECT_EQ(rt->function_run(module, nullptr, 2), 3);  // not a function
  EXPECT_EQ(rt->module_destroy(module), 0);
  EXPECT_EQ(rt->module_destroy(function), 5);  // not a module
  // The optional entry: _cudaLaunchKernelEx answers 1000 + gridDim.x.
  ASSERT_NE(rt->launch_kernel_ex, nullptr);
  CudaLaunchConfig config{};
  config.grid[0] = 7;
  EXPECT_EQ(rt->launch_kernel_ex(&config, nullptr, nullptr), 1007);
}

TEST(RuntimeLoadTest, LoadIsPermanent) {
  const RuntimeTable* rt = LoadFakeLibrary();
  ASSERT_NE(rt, nullptr);
  SetRuntimeLibraryPath("/nonexistent/other.so");  // ignored once loaded
  setenv("CUTECALL_DSL_RUNTIME", "/nonexistent/env.so", 1);
  EXPECT_EQ(RuntimeLibraryPath(), kFakeLibrary);
  ErrorOr<const RuntimeTable*> again = Runtime();
  ASSERT_TRUE(IsOk(again));
  EXPECT_EQ(again.value(), rt);
  EXPECT_TRUE(RuntimeLoaded());
  unsetenv("CUTECALL_DSL_RUNTIME");
}

TEST(RuntimeLoadTest, OverrideTakesPrecedenceOverTheLoadedLibrary) {
  const RuntimeTable* loaded = LoadFakeLibrary();
  ASSERT_NE(loaded, nullptr);
  RuntimeTable fake;
  {
    ScopedRuntimeOverride guard(&fake);
    EXPECT_EQ(Runtime().value(), &fake);
  }
  EXPECT_EQ(Runtime().value(), loaded);
}

TEST(RuntimeLoadTest, ModuleRegistryUsesTheLoadedLibrary) {
  ASSERT_NE(LoadFakeLibrary(), nullptr);
  const std::string& object = cutecall_test::TestObjectBytes();
  ModuleRegistry registry;
  ErrorOr<std::shared_ptr<LoadedModule>> m =
      registry.Acquire(Sha256(object), object, "cc_test", "my_kernel");
  ASSERT_TRUE(IsOk(m));
  abi::Slot slots[2] = {};
  EXPECT_TRUE(IsOk(m.value()->Run(nullptr, slots, 2, m.value()->kernel_name())));
  // The fake library only knows the `cc_test` function.
  EXPECT_TRUE(IsError(registry.Acquire(Sha256(object), object, "cc_other", "my_kernel"),
                      Code::kInternal,
                      {"kernel 'my_kernel'", "cannot get function 'cc_other'",
                       "CuteDSLRT_Error_FakeLibrary"}));
}

// The executable links cutecall statically, so only with the shim's library
// named (as the Python extension finds itself) is the module routed; the
// shim then forwards to the library's _cudaLaunchKernelEx.
TEST(RuntimeLoadTest, ModuleRegistryRoutesLaunchesToTheLoadedLibrary) {
  ASSERT_NE(LoadFakeLibrary(), nullptr);
  const std::string& object = cutecall_test::TestObjectBytes();
  ModuleRegistry registry;
  ErrorOr<std::shared_ptr<LoadedModule>> as_compiled =
      registry.Acquire(Sha256(object), object, "cc_test", "my_kernel");
  ASSERT_TRUE(IsOk(as_compiled));
  EXPECT_NE(as_compiled.value()->launch_unrouted().find("linked statically"),
            std::string::npos);
  as_compiled.value().reset();

  ScopedLaunchShimLibraryOverride shim("/fake/libshim.so");
  ErrorOr<std::shared_ptr<LoadedModule>> routed =
      registry.Acquire(Sha256(object), object, "cc_test", "my_kernel");
  ASSERT_TRUE(IsOk(routed));
  EXPECT_EQ(routed.value()->launch_unrouted(), "");
  CudaLaunchConfig config{};
  config.grid[0] = 42;
  ResetLaunchRecord();
  EXPECT_EQ(cutecall_launch_kex(&config, nullptr, nullptr), 1042);
  EXPECT_EQ(CurrentLaunchRecord().last_result, 1042);
}

}  // namespace
}  // namespace cutecall
