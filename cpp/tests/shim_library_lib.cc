// A shared library that links the cutecall core, as the Python extension
// (_core) does, for launch_record_test.cc: there LaunchShimLibrary() must
// find this library, by the path it was loaded from.
#include <string>

#include "launch_record.h"

extern "C" __attribute__((visibility("default"))) const char*
cutecall_test_launch_shim_library() {
  static const std::string* answer = [] {
    cutecall::ErrorOr<std::string> path = cutecall::LaunchShimLibrary();
    return new std::string(path.ok() ? path.value()
                                     : "error: " + path.status().message());
  }();
  return answer->c_str();
}
