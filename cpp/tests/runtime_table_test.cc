// Runtime resolution without a loadable runtime, overrides and error text.
// Loading a real library is permanent, so the successful load is tested in
// runtime_load_test.cc (its own executable); nothing here loads one.
#include "cutecall/runtime_table.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::IsError;
using cutecall_test::IsOk;

constexpr char kEnv[] = "CUTECALL_DSL_RUNTIME";

// Starts each test with no library path and CUTECALL_DSL_RUNTIME unset, and
// restores both afterwards.
class RuntimeTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(RuntimeLoaded()) << "this executable must never load a runtime";
    if (const char* env = std::getenv(kEnv)) saved_env_ = env;
    unsetenv(kEnv);
    SetRuntimeLibraryPath("");
  }
  void TearDown() override {
    SetRuntimeLibraryPath("");
    if (saved_env_) {
      setenv(kEnv, saved_env_->c_str(), 1);
    } else {
      unsetenv(kEnv);
    }
    EXPECT_FALSE(RuntimeLoaded());
  }

 private:
  std::optional<std::string> saved_env_;
};

TEST_F(RuntimeTableTest, NoPathAndNoEnvironmentFails) {
  EXPECT_EQ(RuntimeLibraryPath(), "");
  EXPECT_TRUE(IsError(Runtime(), Code::kFailedPrecondition,
                      {"libcute_dsl_runtime.so", "CUTECALL_DSL_RUNTIME"}));
  EXPECT_FALSE(RuntimeLoaded());
}

TEST_F(RuntimeTableTest, NonexistentPathFailsNamingThePath) {
  const std::string path = "/nonexistent/dir/libcute_dsl_runtime.so";
  SetRuntimeLibraryPath(path);
  EXPECT_EQ(RuntimeLibraryPath(), path);
  EXPECT_TRUE(IsError(Runtime(), Code::kFailedPrecondition,
                      {"cannot load", "'" + path + "'"}));
  // Not cached: a second attempt tries (and fails) again the same way.
  EXPECT_TRUE(IsError(Runtime(), Code::kFailedPrecondition, {path}));
  EXPECT_FALSE(RuntimeLoaded());
}

TEST_F(RuntimeTableTest, EnvironmentVariableIsUsedWhenNoPathIsSet) {
  const std::string path = "/nonexistent/from_env.so";
  setenv(kEnv, path.c_str(), 1);
  EXPECT_EQ(RuntimeLibraryPath(), path);
  EXPECT_TRUE(IsError(Runtime(), Code::kFailedPrecondition, {"'" + path + "'"}));
}

TEST_F(RuntimeTableTest, ExplicitPathTakesPrecedenceOverEnvironment) {
  setenv(kEnv, "/nonexistent/from_env.so", 1);
  SetRuntimeLibraryPath("/nonexistent/explicit.so");
  EXPECT_EQ(RuntimeLibraryPath(), "/nonexistent/explicit.so");
  ErrorOr<const RuntimeTable*> rt = Runtime();
  EXPECT_TRUE(IsError(rt, Code::kFailedPrecondition, {"/nonexistent/explicit.so"}));
  EXPECT_EQ(rt.status().message().find("from_env"), std::string::npos);
}

TEST_F(RuntimeTableTest, LibraryMissingSomeSymbolsNamesThem) {
  const std::string path = CUTECALL_TEST_PARTIAL_RUNTIME;
  SetRuntimeLibraryPath(path);
  ErrorOr<const RuntimeTable*> rt = Runtime();
  ASSERT_TRUE(IsError(rt, Code::kFailedPrecondition,
                      {"'" + path + "'", "is not a CuTe DSL runtime",
                       "CuteDSLRT_Module_Get_Function", "CuteDSLRT_Function_Run",
                       "CuteDSLRT_GetErrorString"}));
  // The symbols the library does export are not reported missing.
  const std::string& m = rt.status().message();
  EXPECT_EQ(m.find("CuteDSLRT_Module_Create_From_Bytes"), std::string::npos) << m;
  EXPECT_EQ(m.find("CuteDSLRT_Module_Destroy"), std::string::npos) << m;
  EXPECT_EQ(m.find("CuteDSLRT_GetErrorName"), std::string::npos) << m;
  EXPECT_FALSE(RuntimeLoaded());
}

TEST_F(RuntimeTableTest, UnrelatedLibraryNamesAllSixSymbols) {
  SetRuntimeLibraryPath("libm.so.6");
  EXPECT_TRUE(IsError(Runtime(), Code::kFailedPrecondition,
                      {"'libm.so.6'", "CuteDSLRT_Module_Create_From_Bytes",
                       "CuteDSLRT_Module_Get_Function", "CuteDSLRT_Function_Run",
                       "CuteDSLRT_Module_Destroy", "CuteDSLRT_GetErrorName",
                       "CuteDSLRT_GetErrorString"}));
  EXPECT_FALSE(RuntimeLoaded());
}

TEST_F(RuntimeTableTest, OverrideIsReturnedWithoutALibrary) {
  RuntimeTable fake;
  {
    ScopedRuntimeOverride guard(&fake);
    ErrorOr<const RuntimeTable*> rt = Runtime();
    ASSERT_TRUE(IsOk(rt));
    EXPECT_EQ(rt.value(), &fake);
    EXPECT_FALSE(RuntimeLoaded());
  }
  EXPECT_TRUE(IsError(Runtime(), Code::kFailedPrecondition, {"CUTECALL_DSL_RUNTIME"}));
}

TEST_F(RuntimeTableTest, OverrideWinsOverABrokenPath) {
  SetRuntimeLibraryPath("/nonexistent/libcute_dsl_runtime.so");
  RuntimeTable fake;
  ScopedRuntimeOverride guard(&fake);
  ErrorOr<const RuntimeTable*> rt = Runtime();
  ASSERT_TRUE(IsOk(rt));
  EXPECT_EQ(rt.value(), &fake);
}

TEST_F(RuntimeTableTest, OverridesNestAndRestore) {
  RuntimeTable outer, inner;
  {
    ScopedRuntimeOverride a(&outer);
    EXPECT_EQ(Runtime().value(), &outer);
    {
      ScopedRuntimeOverride b(&inner);
      EXPECT_EQ(Runtime().value(), &inner);
    }
    EXPECT_EQ(Runtime().value(), &outer);
  }
  EXPECT_FALSE(Runtime().ok());
}

// ---------------------------------------------------------------------------
// Error text

const char* NameOf(int code) {
  return code == 7 ? "CuteDSLRT_Error_Seven" : nullptr;
}
const char* DescriptionOf(int code) {
  if (code == 7) return "seven went wrong";
  if (code == 8) return "eight went wrong";
  return "";
}

TEST(RuntimeErrorTextTest, KnownCodeHasNameAndDescription) {
  RuntimeTable rt;
  rt.get_error_name = &NameOf;
  rt.get_error_string = &DescriptionOf;
  EXPECT_EQ(RuntimeErrorText(rt, 7), "CuteDSLRT_Error_Seven (seven went wrong)");
}

TEST(RuntimeErrorTextTest, UnknownNameFallsBackToTheCode) {
  RuntimeTable rt;
  rt.get_error_name = &NameOf;
  rt.get_error_string = &DescriptionOf;
  EXPECT_EQ(RuntimeErrorText(rt, 8), "CuteDSLRT error 8 (eight went wrong)");
  EXPECT_EQ(RuntimeErrorText(rt, -3), "CuteDSLRT error -3");  // empty description
}

TEST(RuntimeErrorTextTest, TableWithoutErrorFunctionsStillFormats) {
  RuntimeTable rt;
  EXPECT_EQ(RuntimeErrorText(rt, 5), "CuteDSLRT error 5");
}

TEST(CudaErrorTextTest, KnownCodesAreNamedWithTheirNumber) {
  EXPECT_EQ(CudaErrorText(1), "cudaErrorInvalidValue (1)");
  EXPECT_EQ(CudaErrorText(2), "cudaErrorMemoryAllocation (2)");
  EXPECT_EQ(CudaErrorText(209), "cudaErrorNoKernelImageForDevice (209)");
  EXPECT_EQ(CudaErrorText(700), "cudaErrorIllegalAddress (700)");
  EXPECT_EQ(CudaErrorText(716), "cudaErrorMisalignedAddress (716)");
  EXPECT_EQ(CudaErrorText(719), "cudaErrorLaunchFailure (719)");
}

TEST(CudaErrorTextTest, UnknownCodesShowTheNumber) {
  EXPECT_EQ(CudaErrorText(12345), "CUDA error 12345");
  EXPECT_EQ(CudaErrorText(-1), "CUDA error -1");
}

}  // namespace
}  // namespace cutecall
