// A CUDA driver stand-in for CUTECALL_LAUNCH_BLOCKING tests: records the
// streams it synchronizes and fails or reports a capture on demand. Its
// error names know CUDA_ERROR_ILLEGAL_ADDRESS (700) only.
//   cutecall::DriverTable table = FakeSyncDriver::Table();  // resets it
//   cutecall::ScopedDriverOverride driver(&table);
#ifndef CUTECALL_TESTS_FAKE_SYNC_DRIVER_H_
#define CUTECALL_TESTS_FAKE_SYNC_DRIVER_H_

#include <vector>

#include "device_context.h"

namespace cutecall_test {

struct FakeSyncDriver {
  static inline std::vector<void*> synced;
  static inline int sync_result = 0;
  static inline int capturing = 0;
  static int Synchronize(void* stream) {
    synced.push_back(stream);
    return sync_result;
  }
  static int IsCapturing(void*, int* status) {
    *status = capturing;
    return 0;
  }
  static int ErrorName(int code, const char** name) {
    *name = code == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS" : nullptr;
    return code == 700 ? 0 : 1;
  }
  static cutecall::DriverTable Table() {
    synced.clear();
    sync_result = capturing = 0;
    cutecall::DriverTable t;
    t.stream_synchronize = &Synchronize;
    t.stream_is_capturing = &IsCapturing;
    t.get_error_name = &ErrorName;
    return t;
  }
};

}  // namespace cutecall_test

#endif  // CUTECALL_TESTS_FAKE_SYNC_DRIVER_H_
