// Small helpers shared by the cutecall core tests.
#ifndef CUTECALL_TESTS_TEST_UTIL_H_
#define CUTECALL_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>

#include "cutecall/status.h"

namespace cutecall_test {

// Succeeds when `status` has `code` and its message contains every fragment.
// Usage: EXPECT_TRUE(IsError(s, Code::kInvalidArgument, {"'k'", "rank 9"}));
inline ::testing::AssertionResult IsError(
    const cutecall::Status& status, cutecall::Code code,
    std::initializer_list<std::string_view> fragments) {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected code " << cutecall::CodeName(code) << ", got "
           << status.ToString();
  }
  for (std::string_view f : fragments) {
    if (status.message().find(f) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << f << "\": " << status.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult IsError(
    const cutecall::ErrorOr<T>& result, cutecall::Code code,
    std::initializer_list<std::string_view> fragments) {
  if (result.ok()) return ::testing::AssertionFailure() << "expected an error, got a value";
  return IsError(result.status(), code, fragments);
}

inline ::testing::AssertionResult IsOk(const cutecall::Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.ToString();
}

template <typename T>
::testing::AssertionResult IsOk(const cutecall::ErrorOr<T>& result) {
  return IsOk(result.status());
}

// The whole file, or "" (and a test failure) if it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

#ifdef CUTECALL_TEST_OBJECT
// The ELF object built from test_module.cc: defines cc_test_version,
// cc_other_version and cc_test_foo; references cc_test_missing.
inline const std::string& TestObjectBytes() {
  static const std::string bytes = ReadFile(CUTECALL_TEST_OBJECT);
  return bytes;
}
#endif

}  // namespace cutecall_test

#endif  // CUTECALL_TESTS_TEST_UTIL_H_
