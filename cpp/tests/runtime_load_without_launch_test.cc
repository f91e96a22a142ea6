// Loading a CuTe DSL runtime that exports the six CuteDSLRT_* entry points
// but no _cudaLaunchKernelEx (fake_dsl_runtime_lib.cc built with
// CUTECALL_FAKE_RUNTIME_WITHOUT_LAUNCH): the load succeeds and modules load
// as compiled, their grid and block unknown. Its own executable: a load is
// permanent for the process.
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

using cutecall_test::IsOk;

TEST(RuntimeWithoutLaunchTest, LoadsWithNoLaunchEntryAndModulesLoadAsCompiled) {
  unsetenv("CUTECALL_DSL_RUNTIME");
  SetRuntimeLibraryPath(CUTECALL_TEST_FAKE_RUNTIME_WITHOUT_LAUNCH);
  ErrorOr<const RuntimeTable*> rt = Runtime();
  ASSERT_TRUE(IsOk(rt));
  EXPECT_EQ(rt.value()->launch_kernel_ex, nullptr);
  EXPECT_NE(rt.value()->function_run, nullptr);

  ScopedLaunchShimLibraryOverride shim("/fake/libshim.so");  // not enough
  const std::string& object = cutecall_test::TestObjectBytes();
  ModuleRegistry registry;
  ErrorOr<std::shared_ptr<LoadedModule>> m =
      registry.Acquire(Sha256(object), object, "cc_test", "my_kernel");
  ASSERT_TRUE(IsOk(m));
  EXPECT_EQ(m.value()->launch_unrouted(),
            "the CuTe DSL runtime exports no _cudaLaunchKernelEx");
  abi::Slot slots[2] = {};
  EXPECT_TRUE(IsOk(m.value()->Run(nullptr, slots, 2, "my_kernel")));
}

}  // namespace
}  // namespace cutecall
