// launch_blocking.cc — CUTECALL_LAUNCH_BLOCKING (launch_blocking.h).
#include "launch_blocking.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "device_context.h"

namespace cutecall {
namespace {

// -1: not read yet; 0 off; 1 on.
std::atomic<int> g_blocking{-1};

int FromEnvironment() {
  const char* v = std::getenv("CUTECALL_LAUNCH_BLOCKING");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0 ? 1 : 0;
}

std::string ErrorName(const DriverTable& d, int code) {
  const char* name = nullptr;
  if (d.get_error_name != nullptr && d.get_error_name(code, &name) == 0 &&
      name != nullptr) {
    return std::string(name) + " (" + std::to_string(code) + ")";
  }
  return "CUDA error " + std::to_string(code);
}

}  // namespace

bool LaunchBlocking() {
  int v = g_blocking.load(std::memory_order_relaxed);
  if (v < 0) {
    int expected = -1;
    g_blocking.compare_exchange_strong(expected, FromEnvironment());
    v = g_blocking.load(std::memory_order_relaxed);
  }
  return v == 1;
}

void SetLaunchBlocking(bool on) {
  g_blocking.store(on ? 1 : 0, std::memory_order_relaxed);
}

Status SyncAfterLaunch(void* stream, const std::string& kernel,
                       const std::function<std::string()>& describe_launch) {
  ErrorOr<const DriverTable*> driver = Driver();
  if (!driver.ok()) return driver.status();
  const DriverTable& d = *driver.value();
  if (d.stream_synchronize == nullptr) {
    return FailedPrecondition("cutecall: CUTECALL_LAUNCH_BLOCKING: the CUDA "
                              "driver has no cuStreamSynchronize");
  }
  int capturing = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  if (d.stream_is_capturing != nullptr &&
      d.stream_is_capturing(stream, &capturing) == 0 && capturing != 0) {
    return Status::Ok();
  }
  if (int rc = d.stream_synchronize(stream); rc != 0) {
    return Internal("cutecall: kernel '" + kernel + "' failed on the GPU: " +
                    ErrorName(d, rc) + "; launch: " + describe_launch() +
                    " (CUTECALL_LAUNCH_BLOCKING: the stream was synchronized "
                    "right after this launch, so the fault is this kernel's "
                    "or an earlier, unsynchronized one's on the same stream)");
  }
  return Status::Ok();
}

}  // namespace cutecall
