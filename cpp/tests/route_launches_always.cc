// Linked into the test executables: CUTECALL_LAUNCH_RECORD=1 before main,
// so every module the fakes load is routed through cutecall_launch_kex
// whatever the launch-blocking switch says (launch_route.cc). The tests of
// the default (routed only while blocking is on) set and restore it.
#include <cstdlib>

namespace {
const bool kRouteLaunches = [] {
  setenv("CUTECALL_LAUNCH_RECORD", "1", /*overwrite=*/0);
  return true;
}();
}  // namespace
