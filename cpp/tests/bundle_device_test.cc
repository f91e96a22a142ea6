// A bundle entry against the GPU it is to run on (bundle_device.cc): its
// arch, and what its kernel read of its device while traced (the manifest's
// 'device-reads', format 3), given in BundleOptions or read from a fake CUDA
// driver; and the C ABI's extensible cutecall_open_options (struct_size).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bundle_fixture.h"
#include "bundle_manifest.h"
#include "cutecall/bundle.h"
#include "cutecall/cutecall_c.h"
#include "device_context.h"
#include "fake_runtime.h"
#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::FakeRuntime;
using cutecall_test::IsError;
using cutecall_test::IsOk;

// A driver with one GPU, ordinal 0: compute capability and SM count as set.
struct FakeGpu {
  static inline int major = 9, minor = 0, sm_count = 132;
  static int DeviceGet(int* device, int ordinal) {
    if (ordinal != 0) return 101;  // CUDA_ERROR_INVALID_DEVICE
    *device = 7;
    return 0;
  }
  static int Attribute(int* value, int attribute, int) {
    switch (attribute) {
      case 16: *value = sm_count; return 0;
      case 38: *value = 50 << 20; return 0;
      case 75: *value = major; return 0;
      case 76: *value = minor; return 0;
      case 81: *value = 233472; return 0;
      case 97: *value = 232448; return 0;
      default: return 1;
    }
  }
  static DriverTable Table(int maj, int min, int sms) {
    major = maj;
    minor = min;
    sm_count = sms;
    DriverTable t;
    t.device_get = &DeviceGet;
    t.device_get_attribute = &Attribute;
    return t;
  }
};

class BundleDeviceTest : public BundleTest {
 protected:
  // The fixture's bundle as format 3, entry 'saxpy' compiled for `arch`
  // and having read `reads` (no field when empty).
  void WriteWith(const std::string& arch, const std::string& reads) {
    std::string body = body_;
    body.replace(body.find("cutecall-bundle 1"), 17, "cutecall-bundle 3");
    const size_t saxpy = body.find("entry saxpy\n");
    body.replace(body.find("arch sm_90a", saxpy), 11, "arch " + arch);
    if (!reads.empty()) {
      body.insert(body.find("end\n", saxpy), "device-reads " + reads + "\n");
    }
    Write(dir_ + "/manifest.txt", Seal(body));
  }
  static BundleOptions OnDevice0() {
    BundleOptions o;
    o.device = 0;
    return o;
  }
};

TEST_F(BundleDeviceTest, Sm100aBundleIsRefusedOnSm90aNamingBothArchs) {
  FakeRuntime fake;
  WriteWith("sm_100a", "");
  DriverTable h100 = FakeGpu::Table(9, 0, 132);
  ScopedDriverOverride driver(&h100);
  EXPECT_TRUE(IsError(Bundle::Open(dir_, OnDevice0()), Code::kFailedPrecondition,
                      {"entry 'saxpy'", "field 'arch' is sm_100a", "(sm_90a)",
                       "re-export the bundle for sm_90a"}));
  BundleOptions named;
  named.device_arch = "sm_90a";
  EXPECT_TRUE(IsError(Bundle::Open(dir_, named), Code::kFailedPrecondition,
                      {"sm_100a", "sm_90a"}));
  DriverTable b200 = FakeGpu::Table(10, 0, 148);
  ScopedDriverOverride on_b200(&b200);
  EXPECT_TRUE(IsError(Bundle::Open(dir_, OnDevice0()), Code::kFailedPrecondition,
                      {"entry 'mat'", "field 'arch' is sm_90a", "(sm_100a)"}));
  EXPECT_TRUE(fake.creates.empty());
}

TEST_F(BundleDeviceTest, AnSmCountOtherThanTheOneReadIsRefused) {
  FakeRuntime fake;
  WriteWith("sm_90a", "l2_bytes=52428800,max_active_clusters(2)=66,sm_count=114");
  DriverTable h100 = FakeGpu::Table(9, 0, 132);
  ScopedDriverOverride driver(&h100);
  EXPECT_TRUE(IsError(Bundle::Open(dir_, OnDevice0()), Code::kFailedPrecondition,
                      {dir_, "entry 'saxpy'", "kernel 'saxpy'", "read sm_count = 114",
                       "field 'device-reads'", "this GPU's sm_count is 132",
                       "Re-export the bundle on this GPU, or for it"}));
  // The properties given win over the driver's; 0 is not checked.
  BundleOptions given = OnDevice0();
  given.device_properties.sm_count = 114;
  auto bundle = Bundle::Open(dir_, given);
  ASSERT_TRUE(IsOk(bundle));
  const BundleKernel* saxpy = (*bundle)->Find("saxpy").value();
  EXPECT_EQ(saxpy->device_reads(),
            (std::vector<std::pair<std::string, int64_t>>{
                {"l2_bytes", 52428800}, {"max_active_clusters(2)", 66},
                {"sm_count", 114}}));
  EXPECT_TRUE((*bundle)->Find("mat").value()->device_reads().empty());
  // Without a device, nothing is compared.
  EXPECT_TRUE(IsOk(Bundle::Open(dir_)));
  // L2 is a tuning hint: any L2 runs the kernel.
  BundleOptions other_l2;
  other_l2.device_properties.l2_bytes = 40 << 20;
  EXPECT_TRUE(IsOk(Bundle::Open(dir_, other_l2)));
}

TEST_F(BundleDeviceTest, SharedMemoryReadMustFitTheDevice) {
  FakeRuntime fake;
  WriteWith("sm_90a", "smem_per_block_optin=232448");
  BundleOptions more;
  more.device_properties.smem_per_block_optin = 232448 + 1024;
  EXPECT_TRUE(IsOk(Bundle::Open(dir_, more)));
  BundleOptions less;
  less.device_properties.smem_per_block_optin = 101376;
  EXPECT_TRUE(IsError(Bundle::Open(dir_, less), Code::kFailedPrecondition,
                      {"kernel 'saxpy'", "read smem_per_block_optin = 232448",
                       "this GPU's smem_per_block_optin is 101376"}));
}

TEST_F(BundleDeviceTest, EntriesThatReadNothingLoadWhereverTheirArchRuns) {
  FakeRuntime fake;
  WriteWith("sm_90a", "");
  DriverTable h200 = FakeGpu::Table(9, 0, 132);
  ScopedDriverOverride driver(&h200);
  EXPECT_TRUE(IsOk(Bundle::Open(dir_, OnDevice0())));
  BundleOptions few;
  few.device_properties = {16, 1, 2, 3};
  EXPECT_TRUE(IsOk(Bundle::Open(dir_, few)));
  // A device the driver does not have fails Open, naming the option.
  BundleOptions missing;
  missing.device = 3;
  EXPECT_TRUE(IsError(Bundle::Open(dir_, missing), Code::kInternal,
                      {"cuDeviceGet failed for device 3"}));
}

TEST_F(BundleDeviceTest, BadDeviceReadsAreNamed) {
  FakeRuntime fake;
  for (const char* bad : {"sm_count", "sm_count=", "sm_count=-1", "sm count=1",
                          "sm_count=1,", "=4", "sm_count=0x10", "a=1,a=2"}) {
    WriteWith("sm_90a", bad);
    EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                        {"entry 'saxpy'", "field 'device-reads'"}))
        << bad;
  }
  // Format 3's field: a format 1 or 2 manifest may not hold it.
  std::string body = body_;
  body.insert(body.find("end\n"), "device-reads sm_count=132\n");
  Write(dir_ + "/manifest.txt", Seal(body));
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"entry 'mat'", "unexpected or repeated field 'device-reads'"}));
}

// cutecall_open_options as a C caller of each header version lays it out.
TEST_F(BundleDeviceTest, CAbiReadsOptionsByTheirStructSize) {
  FakeRuntime fake;
  WriteWith("sm_90a", "sm_count=148");
  DriverTable h100 = FakeGpu::Table(9, 0, 132);
  ScopedDriverOverride driver(&h100);
  cutecall_bundle* b = nullptr;
  // Version 2 (this header): the device check refuses the 148-SM kernel.
  cutecall_open_options v2;
  std::memset(&v2, 0, sizeof v2);
  v2.struct_size = CUTECALL_OPEN_OPTIONS_STRUCT_SIZE;
  v2.check_device = 1;
  EXPECT_EQ(cutecall_bundle_open(dir_.c_str(), &v2, &b), CUTECALL_ERROR_FAILED_PRECONDITION);
  EXPECT_NE(std::string(cutecall_last_error()).find("this GPU's sm_count is 132"),
            std::string::npos);
  v2.device = -2;
  EXPECT_EQ(cutecall_bundle_open(dir_.c_str(), &v2, &b), CUTECALL_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cutecall_last_error()).find("field 'device'"), std::string::npos);
  // Version 1 (an older caller): its struct ends at load_modules; what
  // lies beyond is not read (here: the v2 fields, set) and takes defaults.
  cutecall_open_options v1 = v2;
  v1.struct_size = CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V1;
  v1.load_modules = CUTECALL_LOAD_LAZY;
  ASSERT_EQ(cutecall_bundle_open(dir_.c_str(), &v1, &b), CUTECALL_OK) << cutecall_last_error();
  EXPECT_EQ(cutecall_bundle_num_kernels(b), 2u);
  cutecall_bundle_close(b);
  b = nullptr;
  // Below version 1: refused, naming the field.
  for (size_t size : {size_t(0), sizeof(size_t), CUTECALL_OPEN_OPTIONS_STRUCT_SIZE_V1 - 1}) {
    v1.struct_size = size;
    EXPECT_EQ(cutecall_bundle_open(dir_.c_str(), &v1, &b), CUTECALL_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(b, nullptr);
    const std::string error = cutecall_last_error();
    EXPECT_NE(error.find("field 'struct_size' of argument 'options' is " +
                         std::to_string(size)), std::string::npos) << error;
    EXPECT_NE(error.find("at least 28"), std::string::npos) << error;
  }
}

TEST_F(BundleDeviceTest, CAbiAcceptsANewerStructOnlyWithItsUnknownFieldsZero) {
  FakeRuntime fake;
  struct Newer {
    cutecall_open_options known;
    int64_t future_option;
  } newer;
  std::memset(&newer, 0, sizeof newer);
  newer.known.struct_size = sizeof newer;
  newer.known.load_modules = CUTECALL_LOAD_NONE;
  cutecall_bundle* b = nullptr;
  ASSERT_EQ(cutecall_bundle_open(dir_.c_str(), &newer.known, &b), CUTECALL_OK)
      << cutecall_last_error();
  cutecall_bundle_close(b);
  newer.future_option = 1;
  EXPECT_EQ(cutecall_bundle_open(dir_.c_str(), &newer.known, &b),
            CUTECALL_ERROR_INVALID_ARGUMENT);
  const std::string error = cutecall_last_error();
  EXPECT_NE(error.find("field 'struct_size' of argument 'options' is " +
                       std::to_string(sizeof newer)), std::string::npos) << error;
  EXPECT_NE(error.find("byte " + std::to_string(offsetof(Newer, future_option))),
            std::string::npos) << error;
}

}  // namespace
}  // namespace cutecall
