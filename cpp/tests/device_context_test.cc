#include "device_context.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::IsError;
using cutecall_test::IsOk;

constexpr int kErrorInvalidContext = 201;  // CUDA_ERROR_INVALID_CONTEXT

void* Ptr(uintptr_t a) { return reinterpret_cast<void*>(a); }

// The primary context the fake hands out for `device`.
void* PrimaryOf(int device) { return Ptr(0xA000 + uintptr_t(device) * 0x10); }

// One recorded driver call (or the callback run by OnDevice).
struct Event {
  std::string call;  // "get_device", "get_current", "set_current", "retain", "fn"
  void* context = nullptr;  // set_current: the context made current
  int device = -1;          // retain: the device; fn: the device current then
  bool operator==(const Event& o) const {
    return call == o.call && context == o.context && device == o.device;
  }
};

std::ostream& operator<<(std::ostream& os, const Event& e) {
  return os << "{" << e.call << ", ctx=" << e.context << ", dev=" << e.device
            << "}";
}

// A fake CUDA driver: a current context per (single) thread, contexts mapped
// to devices, programmable failures. Its DriverTable holds static functions
// that dispatch to the live instance.
class FakeDriver {
 public:
  FakeDriver() {
    live_ = this;
    table_.init = &Init;
    table_.ctx_get_device = &GetDevice;
    table_.ctx_get_current = &GetCurrent;
    table_.ctx_set_current = &SetCurrent;
    table_.primary_ctx_retain = &Retain;
  }
  ~FakeDriver() { live_ = nullptr; }
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;

  const DriverTable& table() const { return table_; }

  // Makes `context`, belonging to `device`, current.
  void MakeCurrent(void* context, int device) {
    devices_[context] = device;
    current = context;
  }
  // The device of the current context, or -1 without one.
  int CurrentDevice() const {
    auto it = devices_.find(current);
    return it == devices_.end() ? -1 : it->second;
  }

  // State and programmable failures.
  void* current = nullptr;
  int get_device_error = 0;   // returned by ctx_get_device (besides 201
                              // when no context is current)
  int get_current_error = 0;
  int retain_error = 0;
  int set_current_error = 0;  // returned by set_current calls number
  int set_current_fail_from = 0;  // >= this (0-based); earlier ones succeed

  std::vector<Event> events;
  int set_current_calls = 0;

  void RecordFn() { events.push_back({"fn", nullptr, CurrentDevice()}); }

 private:
  static int Init(unsigned) { return 0; }
  static int GetDevice(int* device) {
    FakeDriver& f = *live_;
    f.events.push_back({"get_device"});
    if (f.get_device_error != 0) return f.get_device_error;
    if (f.current == nullptr) return kErrorInvalidContext;
    *device = f.CurrentDevice();
    return 0;
  }
  static int GetCurrent(void** context) {
    FakeDriver& f = *live_;
    f.events.push_back({"get_current"});
    if (f.get_current_error != 0) return f.get_current_error;
    *context = f.current;
    return 0;
  }
  static int SetCurrent(void* context) {
    FakeDriver& f = *live_;
    f.events.push_back({"set_current", context});
    if (f.set_current_error != 0 && f.set_current_calls++ >= f.set_current_fail_from) {
      return f.set_current_error;
    }
    f.current = context;
    return 0;
  }
  static int Retain(void** context, int device) {
    FakeDriver& f = *live_;
    f.events.push_back({"retain", nullptr, device});
    if (f.retain_error != 0) return f.retain_error;
    *context = PrimaryOf(device);
    f.devices_[*context] = device;
    return 0;
  }

  static FakeDriver* live_;
  DriverTable table_;
  std::map<void*, int> devices_;
};

FakeDriver* FakeDriver::live_ = nullptr;

class DeviceContextTest : public ::testing::Test {
 protected:
  DeviceContextTest() : override_(&fake_.table()) {
    fake_.MakeCurrent(kUserContext, 0);  // a context of device 0 is current
  }

  // OnDevice(device) with a callback that records itself and returns `result`.
  Status Run(int device, Status result = Status::Ok()) {
    ErrorOr<const DriverTable*> d = Driver();
    EXPECT_TRUE(IsOk(d));
    if (!d.ok()) return d.status();
    return OnDevice(*d.value(), device, [&] {
      fake_.RecordFn();
      return result;
    });
  }

  int FnRuns() const {
    int n = 0;
    for (const Event& e : fake_.events) n += e.call == "fn";
    return n;
  }

  void* const kUserContext = Ptr(0xC0DE0);
  FakeDriver fake_;
  ScopedDriverOverride override_;
};

// ---------------------------------------------------------------------------
// Driver() and the override

TEST_F(DeviceContextTest, DriverReturnsTheOverride) {
  ErrorOr<const DriverTable*> d = Driver();
  ASSERT_TRUE(IsOk(d));
  EXPECT_EQ(d.value(), &fake_.table());
}

TEST_F(DeviceContextTest, OverridesNestAndRestoreThePreviousOne) {
  DriverTable inner_table;
  {
    ScopedDriverOverride inner(&inner_table);
    ErrorOr<const DriverTable*> d = Driver();
    ASSERT_TRUE(IsOk(d));
    EXPECT_EQ(d.value(), &inner_table);
  }
  ErrorOr<const DriverTable*> d = Driver();
  ASSERT_TRUE(IsOk(d));
  EXPECT_EQ(d.value(), &fake_.table());
}

// Without any override Driver() loads libcuda.so.1; on a machine without a
// driver (or without a GPU) it fails cleanly with an error naming it.
TEST(DeviceContextDriverTest, WithoutOverrideLoadsLibcudaOrSaysWhyNot) {
  ErrorOr<const DriverTable*> d = Driver();
  if (d.ok()) {
    const DriverTable* t = d.value();
    ASSERT_NE(t, nullptr);
    EXPECT_NE(t->init, nullptr);
    EXPECT_NE(t->ctx_get_device, nullptr);
    EXPECT_NE(t->ctx_get_current, nullptr);
    EXPECT_NE(t->ctx_set_current, nullptr);
    EXPECT_NE(t->primary_ctx_retain, nullptr);
    // An override still takes precedence once the real driver is loaded.
    DriverTable fake;
    ScopedDriverOverride o(&fake);
    ErrorOr<const DriverTable*> again = Driver();
    ASSERT_TRUE(IsOk(again));
    EXPECT_EQ(again.value(), &fake);
  } else if (d.status().code() == Code::kFailedPrecondition) {
    EXPECT_TRUE(IsError(d, Code::kFailedPrecondition, {"libcuda.so.1"}));
  } else {
    EXPECT_TRUE(IsError(d, Code::kInternal, {"cuInit failed", "CUDA driver error"}));
  }
}

TEST(DeviceContextDriverTest, DriverErrorNamesTheCallAndDevice) {
  EXPECT_TRUE(IsError(internal::DriverError("cuCtxSetCurrent", 700, 3),
                      Code::kInternal,
                      {"cutecall: cuCtxSetCurrent failed for device 3: CUDA "
                       "driver error 700"}));
  // Calls not about a device (cuInit) name none.
  Status s = internal::DriverError("cuInit", 100, -1);
  EXPECT_TRUE(IsError(s, Code::kInternal,
                      {"cutecall: cuInit failed: CUDA driver error 100"}));
  EXPECT_EQ(s.message().find("device"), std::string::npos) << s.message();
}

// ---------------------------------------------------------------------------
// OnDevice: the fast path

TEST_F(DeviceContextTest, FastPathMakesExactlyOneDriverCall) {
  ASSERT_TRUE(IsOk(Run(0)));
  EXPECT_EQ(fake_.events, (std::vector<Event>{{"get_device"}, {"fn", nullptr, 0}}));
  EXPECT_EQ(fake_.current, kUserContext);
}

TEST_F(DeviceContextTest, FastPathReturnsTheCallbacksError) {
  EXPECT_TRUE(IsError(Run(0, InvalidArgument("bad tensor")),
                      Code::kInvalidArgument, {"bad tensor"}));
  EXPECT_EQ(fake_.events, (std::vector<Event>{{"get_device"}, {"fn", nullptr, 0}}));
}

TEST_F(DeviceContextTest, FastPathWorksOnANonzeroDevice) {
  fake_.MakeCurrent(Ptr(0xBEEF0), 3);
  ASSERT_TRUE(IsOk(Run(3)));
  EXPECT_EQ(fake_.events, (std::vector<Event>{{"get_device"}, {"fn", nullptr, 3}}));
}

// ---------------------------------------------------------------------------
// OnDevice: switching devices

TEST_F(DeviceContextTest, SwitchSetsThePrimaryContextThenRestoresThePrevious) {
  ASSERT_TRUE(IsOk(Run(1)));
  const std::vector<Event> expected = {
      {"get_device"},
      {"retain", nullptr, 1},
      {"get_current"},
      {"set_current", PrimaryOf(1)},
      {"fn", nullptr, 1},  // the callback runs with device 1 current
      {"set_current", kUserContext},
  };
  EXPECT_EQ(fake_.events, expected);
  EXPECT_EQ(fake_.current, kUserContext);
  EXPECT_EQ(fake_.CurrentDevice(), 0);
}

TEST_F(DeviceContextTest, SwitchReturnsTheCallbacksErrorAndStillRestores) {
  EXPECT_TRUE(IsError(Run(2, Internal("kernel failed")), Code::kInternal,
                      {"kernel failed"}));
  ASSERT_FALSE(fake_.events.empty());
  EXPECT_EQ(fake_.events.back(), (Event{"set_current", kUserContext}));
  EXPECT_EQ(FnRuns(), 1);
  EXPECT_EQ(fake_.current, kUserContext);
}

TEST_F(DeviceContextTest, NoCurrentContextTakesTheSwitchPath) {
  fake_.current = nullptr;  // cuCtxGetDevice fails: no context on this thread
  ASSERT_TRUE(IsOk(Run(0)));
  const std::vector<Event> expected = {
      {"get_device"},
      {"retain", nullptr, 0},
      {"get_current"},
      {"set_current", PrimaryOf(0)},
      {"fn", nullptr, 0},
      {"set_current", nullptr},  // back to no context
  };
  EXPECT_EQ(fake_.events, expected);
  EXPECT_EQ(fake_.current, nullptr);
}

TEST_F(DeviceContextTest, AFailingGetDeviceTakesTheSwitchPath) {
  fake_.get_device_error = 999;  // even though device 0 is in fact current
  ASSERT_TRUE(IsOk(Run(0)));
  EXPECT_EQ(FnRuns(), 1);
  ASSERT_EQ(fake_.events.size(), 6u);
  EXPECT_EQ(fake_.events[3], (Event{"set_current", PrimaryOf(0)}));
  EXPECT_EQ(fake_.events[5], (Event{"set_current", kUserContext}));
  EXPECT_EQ(fake_.current, kUserContext);
}

TEST_F(DeviceContextTest, FakeTablesAreNotCachedAcrossCalls) {
  ASSERT_TRUE(IsOk(Run(1)));
  ASSERT_TRUE(IsOk(Run(1)));
  int retains = 0;
  for (const Event& e : fake_.events) retains += e.call == "retain";
  EXPECT_EQ(retains, 2);
}

// ---------------------------------------------------------------------------
// OnDevice: driver failures

TEST_F(DeviceContextTest, RetainFailureIsInternalNamingCallAndDevice) {
  fake_.retain_error = 2;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_TRUE(IsError(Run(1), Code::kInternal,
                      {"cuDevicePrimaryCtxRetain failed for device 1",
                       "CUDA driver error 2"}));
  EXPECT_EQ(fake_.events,
            (std::vector<Event>{{"get_device"}, {"retain", nullptr, 1}}));
  EXPECT_EQ(fake_.current, kUserContext);
}

TEST_F(DeviceContextTest, GetCurrentFailureIsInternalNamingCallAndDevice) {
  fake_.get_current_error = 3;  // CUDA_ERROR_NOT_INITIALIZED
  EXPECT_TRUE(IsError(Run(1), Code::kInternal,
                      {"cuCtxGetCurrent failed for device 1",
                       "CUDA driver error 3"}));
  EXPECT_EQ(FnRuns(), 0);
  for (const Event& e : fake_.events) EXPECT_NE(e.call, "set_current");
  EXPECT_EQ(fake_.current, kUserContext);
}

TEST_F(DeviceContextTest, SetCurrentFailureIsInternalAndSkipsTheCallback) {
  fake_.set_current_error = 201;
  EXPECT_TRUE(IsError(Run(2), Code::kInternal,
                      {"cuCtxSetCurrent failed for device 2",
                       "CUDA driver error 201"}));
  EXPECT_EQ(FnRuns(), 0);
  const std::vector<Event> expected = {
      {"get_device"},
      {"retain", nullptr, 2},
      {"get_current"},
      {"set_current", PrimaryOf(2)},  // failed: nothing to restore
  };
  EXPECT_EQ(fake_.events, expected);
  EXPECT_EQ(fake_.current, kUserContext);
}

TEST_F(DeviceContextTest, RestoreFailureAfterASuccessfulCallbackIsReported) {
  fake_.set_current_error = 4;  // CUDA_ERROR_DEINITIALIZED
  fake_.set_current_fail_from = 1;  // the switch works, the restore fails
  EXPECT_TRUE(IsError(Run(1), Code::kInternal,
                      {"cuCtxSetCurrent (restore) failed for device 1",
                       "CUDA driver error 4"}));
  EXPECT_EQ(FnRuns(), 1);
  EXPECT_EQ(fake_.events.back(), (Event{"set_current", kUserContext}));
}

TEST_F(DeviceContextTest, RestoreFailureAfterAFailedCallbackKeepsItsError) {
  fake_.set_current_error = 4;
  fake_.set_current_fail_from = 1;
  Status s = Run(1, InvalidArgument("operand 'x' is misaligned"));
  EXPECT_TRUE(IsError(s, Code::kInvalidArgument, {"operand 'x' is misaligned"}));
  EXPECT_EQ(FnRuns(), 1);
}

TEST_F(DeviceContextTest, DeviceOrdinalOutOfRangeIsInvalidArgument) {
  for (int device : {-1, -7, 1025, 1 << 30}) {
    fake_.events.clear();
    EXPECT_TRUE(IsError(Run(device), Code::kInvalidArgument,
                        {"device ordinal " + std::to_string(device),
                         "out of range"}))
        << device;
    EXPECT_EQ(fake_.events, (std::vector<Event>{{"get_device"}})) << device;
  }
  EXPECT_EQ(fake_.current, kUserContext);
  // The largest accepted ordinal.
  fake_.events.clear();
  EXPECT_TRUE(IsOk(Run(1024)));
  EXPECT_EQ(FnRuns(), 1);
}


// A driver whose device `ordinal` is CUdevice 100 + ordinal, of compute
// capability `capability` (major, minor); device 3 does not exist.
int capability[2] = {9, 0};
int FakeDeviceGet(int* device, int ordinal) {
  if (ordinal == 3) return 101;  // CUDA_ERROR_INVALID_DEVICE
  *device = 100 + ordinal;
  return 0;
}
int FakeAttribute(int* value, int attribute, int device) {
  if (device < 100) return 1;
  *value = attribute == 75 ? capability[0] : attribute == 76 ? capability[1] : -1;
  return 0;
}

TEST(DeviceArchTest, NamesTheComputeCapabilityWithTheArchSuffixFrom9On) {
  DriverTable t;
  t.device_get = &FakeDeviceGet;
  t.device_get_attribute = &FakeAttribute;
  for (auto [major, minor, arch] : {std::tuple{9, 0, "sm_90a"},
                                    std::tuple{10, 0, "sm_100a"},
                                    std::tuple{8, 6, "sm_86"},
                                    std::tuple{12, 1, "sm_121a"}}) {
    capability[0] = major;
    capability[1] = minor;
    ErrorOr<std::string> got = DeviceArch(t, 1);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got.value(), arch);
  }
  EXPECT_TRUE(IsError(DeviceArch(t, 3).status(), Code::kInternal,
                      {"cuDeviceGet failed for device 3", "101"}));
}

// A B200's attributes (148 SMs, 227 KiB opt-in, 228 KiB per SM, 126 MiB L2).
int FakeB200Attribute(int* value, int attribute, int device) {
  if (device < 100) return 1;
  switch (attribute) {
    case 16: *value = 148; return 0;
    case 38: *value = 126 << 20; return 0;
    case 75: *value = 10; return 0;
    case 76: *value = 0; return 0;
    case 81: *value = 233472; return 0;
    case 97: *value = 232448; return 0;
    default: return 1;  // CUDA_ERROR_INVALID_VALUE: not read
  }
}

TEST(DeviceAttributesTest, ReadsWhatKernelsReadWhileTraced) {
  DriverTable t;
  t.device_get = &FakeDeviceGet;
  t.device_get_attribute = &FakeB200Attribute;
  ErrorOr<DeviceAttributes> got = ReadDeviceAttributes(t, 0);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got.value().sm_count, 148);
  EXPECT_EQ(got.value().smem_per_block_optin, 232448);
  EXPECT_EQ(got.value().smem_per_sm, 233472);
  EXPECT_EQ(got.value().l2_bytes, 126 << 20);
  EXPECT_EQ(got.value().major, 10);
  EXPECT_EQ(got.value().minor, 0);
  EXPECT_TRUE(IsError(ReadDeviceAttributes(t, 3).status(), Code::kInternal,
                      {"cuDeviceGet failed for device 3"}));
  t.device_get_attribute = &FakeAttribute;  // answers -1 for the SM count
  capability[0] = 9;
  EXPECT_TRUE(ReadDeviceAttributes(t, 0).ok());
}

}  // namespace
}  // namespace cutecall
