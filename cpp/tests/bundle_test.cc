// Bundle reader tests: bundles written here in format 1 (as cutecall.export
// writes them) around the test ELF object, run against the fake runtime.
// Lazy and eager module loading: bundle_load_test.cc.
#include "cutecall/bundle.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <limits>
#include <string>
#include <vector>

#include "bundle_fixture.h"
#include "sha256.h"
#include "cutecall/tensor_ref.h"
#include "fake_runtime.h"
#include "test_util.h"

namespace cutecall {
namespace {

using abi::Source;
using cutecall_test::FakeRuntime;
using cutecall_test::IsError;
using cutecall_test::IsOk;

BundleOptions Eager() {
  BundleOptions o;
  o.eager_load = true;
  return o;
}

TEST_F(BundleTest, OpensFindsAndRunsWithPackedSlots) {
  FakeRuntime fake;
  auto bundle = Bundle::Open(dir_, {"", "sm_90a"});
  ASSERT_TRUE(IsOk(bundle));
  EXPECT_EQ((*bundle)->names(), (std::vector<std::string>{"mat", "saxpy"}));
  EXPECT_EQ((*bundle)->digest(), ToHex(Sha256(body_)));
  EXPECT_EQ((*bundle)->dsl_version(), "4.8.1");
  EXPECT_EQ(fake.creates.size(), 0u);  // modules load at their first Run
  auto k = (*bundle)->Find("saxpy");
  ASSERT_TRUE(IsOk(k));
  EXPECT_EQ((*k)->num_inputs(), 2u);
  EXPECT_EQ((*k)->scalar_types(), std::vector<std::string>{"Float32"});

  alignas(16) static float x[8], y[8], out[8];
  const int64_t n5[] = {5}, n6[] = {6};
  void* stream = reinterpret_cast<void*>(0x5);
  ASSERT_TRUE(IsOk((*k)->Run(stream, {{x, n5, 1}, {y, n5, 1}}, {{out, n6, 1}},
                             {ScalarF32(2.5f)})));
  EXPECT_EQ(fake.creates.size(), 1u);  // saxpy's (object, prefix) only
  ASSERT_EQ(fake.runs.size(), 1u);
  const auto& run = fake.runs[0];
  EXPECT_EQ(run.stream, stream);
  ASSERT_EQ(run.slots.size(), 7u);
  EXPECT_EQ(run.slots[0].ptr, x);
  EXPECT_EQ(run.slots[1].i32, 5);
  EXPECT_EQ(run.slots[2].ptr, y);
  EXPECT_EQ(run.slots[4].ptr, out);
  EXPECT_EQ(run.slots[5].i32, 6);
  EXPECT_EQ(run.slots[6].f32, 2.5f);
  EXPECT_EQ(run.slots[6].bits >> 32, 0u);  // upper half of an f32 is zero
}

TEST_F(BundleTest, UnknownKernelNameListsTheNames) {
  FakeRuntime fake;
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  EXPECT_TRUE(IsError((*bundle)->Find("gemm"), Code::kNotFound,
                      {dir_, "no kernel 'gemm'", "mat, saxpy"}));
}

// Eager: every object is checked before any module loads (lazily, each
// before its own: bundle_load_test.cc).
TEST_F(BundleTest, TamperedObjectIsRefusedBeforeAnythingLoads) {
  FakeRuntime fake;
  std::string bytes = TestObjectBytes();
  bytes[bytes.size() / 2] ^= 0x40;
  Write(ObjectPath(), bytes);
  EXPECT_TRUE(IsError(Bundle::Open(dir_, Eager()), Code::kInvalidArgument,
                      {dir_, "entry 'mat'", "objects/" + object_hex_ + ".o",
                       "field 'sha256'", "tampered"}));
  EXPECT_TRUE(fake.creates.empty());
}

TEST_F(BundleTest, TruncatedObjectNamesTheSize) {
  FakeRuntime fake;
  Write(ObjectPath(), TestObjectBytes().substr(0, 100));
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"has 100 bytes", "field 'size'"}));
}

TEST_F(BundleTest, TamperedManifestFailsItsDigest) {
  FakeRuntime fake;
  EditManifest("arch sm_90a", "arch sm_80", /*reseal=*/false);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {dir_, "manifest.txt", "field 'manifest-sha256'",
                       "tampered"}));
  Write(dir_ + "/manifest.txt", Seal(body_).substr(0, body_.size() + 20));
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"manifest.txt", "truncated"}));
  EXPECT_TRUE(fake.creates.empty());
}

TEST_F(BundleTest, PinnedDigestMustMatch) {
  FakeRuntime fake;
  BundleOptions options;
  options.expected_digest = std::string(64, '0');
  EXPECT_TRUE(IsError(Bundle::Open(dir_, options), Code::kInvalidArgument,
                      {"field 'manifest-sha256'", "expected 0000"}));
  options.expected_digest = ToHex(Sha256(body_));
  EXPECT_TRUE(IsOk(Bundle::Open(dir_, options)));
}

TEST_F(BundleTest, MissingFilesAreNamed) {
  FakeRuntime fake;
  fs::remove(ObjectPath());
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kNotFound,
                      {"entry 'mat'", "missing file 'objects/" + object_hex_}));
  fs::remove(dir_ + "/manifest.txt");
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kNotFound,
                      {dir_, "missing file 'manifest.txt'"}));
  EXPECT_TRUE(IsError(Bundle::Open(dir_ + "/nope"), Code::kNotFound,
                      {"nope", "no such directory"}));
}

TEST_F(BundleTest, WrongVersionsAreRefused) {
  FakeRuntime fake;
  EditManifest("cutecall-bundle 1", "cutecall-bundle 4", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"field 'cutecall-bundle' must be 1..3", "got 'cutecall-bundle 4'"}));
  EditManifest("plan-version 3\nplan 3", "plan-version 4\nplan 4", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"entry 'mat'", "field 'plan-version' is 4", "1..3"}));
  EditManifest("plan-version 3\nplan 3", "plan-version 1\nplan 3", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"field 'plan' must start with its version 1"}));
}

TEST_F(BundleTest, BadFieldsAreNamed) {
  FakeRuntime fake;
  EditManifest("num-slots 6", "num-slots 9", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"entry 'mat'", "field 'num-slots' is 9", "plan has 6"}));
  EditManifest("function cc_other", "function cc_nope", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_, Eager()), Code::kNotFound,
                      {"entry 'mat'", "field 'function'", "cc_nope_version"}));
  EditManifest("scalars Float32:alpha", "scalars Half:alpha", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"entry 'saxpy'", "field 'scalars'", "'Half'"}));
  EditManifest("layouts 1,0;1,0", "layouts 1,1;1,0", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"entry 'mat'", "field 'layouts'"}));
  EditManifest("kernel mat\n", "kernel mat\nkernel again\n", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"line 6", "entry 'mat'", "repeated field 'kernel'"}));
  EditManifest("symbols\n", "", true);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kInvalidArgument,
                      {"entry 'mat'", "missing field(s) symbols"}));
  EXPECT_TRUE(fake.creates.empty());
}

TEST_F(BundleTest, ArchMustRunOnTheDevice) {
  FakeRuntime fake;
  EXPECT_TRUE(IsError(Bundle::Open(dir_, {"", "sm_100"}),
                      Code::kFailedPrecondition,
                      {"entry 'mat'", "field 'arch' is sm_90a", "sm_100"}));
  EXPECT_TRUE(ArchRunsOn("sm_90a", "sm_90"));
  EXPECT_FALSE(ArchRunsOn("sm_90a", "sm_91"));
  EXPECT_TRUE(ArchRunsOn("sm_80", "sm_86"));
  EXPECT_FALSE(ArchRunsOn("sm_86", "sm_80"));
  EXPECT_FALSE(ArchRunsOn("sm_90", "sm_100"));
  EXPECT_TRUE(ArchRunsOn("sm_100f", "sm_103a"));
  EXPECT_FALSE(ArchRunsOn("gfx90a", "sm_90"));
  // Leading zeros do not count; no number of digits overflows (UBSan found
  // the int accumulating them overflowing past 9 digits).
  EXPECT_TRUE(ArchRunsOn("sm_0090a", "sm_90"));
  const std::string long_arch = "sm_" + std::string(40, '9') + "a";
  EXPECT_TRUE(ArchRunsOn(long_arch, long_arch));
  EXPECT_FALSE(ArchRunsOn(long_arch, "sm_90"));
  EXPECT_FALSE(ArchRunsOn("sm_90", "sm_" + std::string(40, '9')));
}

TEST_F(BundleTest, WorldWritableBundleIsRefused) {
  FakeRuntime fake;
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  EXPECT_TRUE(IsError(Bundle::Open(dir_), Code::kFailedPrecondition,
                      {"writable by other users"}));
}

TEST_F(BundleTest, RunChecksArgumentsBeforeLaunch) {
  FakeRuntime fake;
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  const BundleKernel* saxpy = (*bundle)->Find("saxpy").value();
  const BundleKernel* mat = (*bundle)->Find("mat").value();
  alignas(16) static float a[64], b[64];
  const int64_t n[] = {4}, shape[] = {4, 8};
  EXPECT_TRUE(IsError(saxpy->Run(nullptr, {{a, n, 1}}, {{b, n, 1}},
                                 {ScalarF32(1)}),
                      Code::kInvalidArgument,
                      {"'saxpy'", "called with 1 inputs", "takes 2"}));
  EXPECT_TRUE(IsError(saxpy->Run(nullptr, {{a, n, 1}, {a, n, 1}}, {{b, n, 1}}),
                      Code::kInvalidArgument, {"0 scalars", "and 1"}));
  EXPECT_TRUE(IsError(mat->Run(nullptr, {{a, n, 1}}, {{b, shape, 2}}),
                      Code::kInvalidArgument, {"'mat'", "'x'", "rank 1"}));
  const int64_t compact[] = {8, 1}, transposed[] = {1, 4};
  EXPECT_TRUE(IsOk(mat->Run(nullptr, {{a, shape, 2, compact}}, {{b, shape, 2}})));
  EXPECT_TRUE(IsError(mat->Run(nullptr, {{a, shape, 2, transposed}},
                               {{b, shape, 2}}),
                      Code::kInvalidArgument,
                      {"'mat'", "operand 'x'", "stride of dim 1 is 4"}));
  EXPECT_EQ(fake.runs.size(), 1u);
}

// Checking that a compact operand's given strides are compact multiplied
// the extents past int64 on int32-sized extents (UBSan: signed overflow).
TEST_F(BundleTest, CompactCheckHandlesStridesNearInt64) {
  PlanSpec p;
  p.num_args = 1;
  p.num_rets = 1;
  p.operands = {DynamicOperand(Source::kArg, 0, 3),
                DynamicOperand(Source::kRet, 0, 3)};
  Write(dir_ + "/manifest.txt",
        Seal(body_ + Entry("cube", "cc_test", Encode(p), "x,out", "", 8, "",
                           "2,1,0;2,1,0")));
  FakeRuntime fake;
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  const BundleKernel* cube = (*bundle)->Find("cube").value();
  alignas(16) static float a[4];
  constexpr int64_t m = std::numeric_limits<int32_t>::max();
  const int64_t dims[] = {m, m, m}, compact[] = {m * m, m, 1},
                swapped[] = {m, m * m, 1};
  EXPECT_TRUE(IsOk(cube->Run(nullptr, {{a, dims, 3, compact}}, {{a, dims, 3}})));
  EXPECT_TRUE(IsError(cube->Run(nullptr, {{a, dims, 3, swapped}},
                                {{a, dims, 3}}),
                      Code::kInvalidArgument,
                      {"'cube'", "operand 'x'", "stride of dim 1 is"}));
  EXPECT_EQ(fake.runs.size(), 1u);
}

TEST_F(BundleTest, LaunchFailuresNameTheKernel) {
  FakeRuntime fake;
  fake.run_cuda_status = 700;
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  alignas(16) static float a[16];
  const int64_t shape[] = {2, 2};
  EXPECT_TRUE(IsError((*bundle)->Find("mat").value()->Run(nullptr, {{a, shape, 2}},
                                                     {{a, shape, 2}}),
                      Code::kInternal, {"'mat'", "cudaErrorIllegalAddress"}));
}

TEST(BundleScalars, SlotsHoldTheAbiBytes) {
  EXPECT_EQ(ScalarI32(-2).i64, -2);
  EXPECT_EQ(ScalarBool(true).bits, 1u);
  EXPECT_EQ(ScalarF64(0.5).f64, 0.5);
  EXPECT_EQ(ScalarF32(-1.0f).bits, 0xbf800000u);
}

// Issue 38: modules load once per process; a bundle opened without loading
// lists its entries and runs every check but the launch.
TEST_F(BundleTest, ModulesLoadOnceAndInspectionLoadsNothing) {
  FakeRuntime fake;
  auto inspect = Bundle::Open(dir_, {"", "", /*load_modules=*/false});
  ASSERT_TRUE(IsOk(inspect));
  EXPECT_EQ(fake.creates.size(), 0u);
  ASSERT_EQ((*inspect)->size(), 2u);
  EXPECT_EQ((*inspect)->kernel(1).name(), "saxpy");
  EXPECT_EQ((*inspect)->kernel(1).scalar_names(), std::vector<std::string>{"alpha"});
  EXPECT_FALSE((*inspect)->kernel(1).loaded());
  EXPECT_EQ((*inspect)->FindOrNull("nope"), nullptr);
  alignas(16) static float x[8], out[8];
  const int64_t n5[] = {5}, n6[] = {6};
  const BundleKernel* k = (*inspect)->FindOrNull("saxpy");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(IsError(k->Run(nullptr, {{x, n5, 1}, {x, n5, 2}}, {{out, n6, 1}},
                             {ScalarF32(1)}),
                      Code::kInvalidArgument, {"'saxpy'", "rank 2"}));
  EXPECT_TRUE(IsError(k->Run(nullptr, {{x, n5, 1}, {x, n5, 1}}, {{out, n6, 1}},
                             {ScalarF32(1)}),
                      Code::kFailedPrecondition, {"load_modules = false"}));

  auto first = Bundle::Open(dir_, Eager());
  auto second = Bundle::Open(dir_, Eager());
  ASSERT_TRUE(IsOk(first));
  ASSERT_TRUE(IsOk(second));
  EXPECT_EQ(fake.creates.size(), 2u);  // the second open shares the modules
  EXPECT_TRUE((*second)->kernel(0).loaded());
  EXPECT_NE((*first)->id(), (*second)->id());
  EXPECT_NE((*first)->id(), (*inspect)->id());
}

// What a generated header does: its entry, checked against the header.
TEST_F(BundleTest, TypedCallsCheckTheHeaderAndRun) {
  FakeRuntime fake;
  auto bundle = Bundle::Open(dir_);
  ASSERT_TRUE(IsOk(bundle));
  static constexpr int32_t kRanks[] = {1, 1, 1}, kBytes[] = {4, 4, 4};
  static constexpr int32_t kWrongRanks[] = {1, 2, 1};
  const typed_internal::Expect right{"k.h", "saxpy", kRanks, kBytes, 2, 1, 1};
  const typed_internal::Expect rank{"k.h", "saxpy", kWrongRanks, kBytes, 2, 1, 1};
  const typed_internal::Expect arity{"k.h", "saxpy", kRanks, kBytes, 1, 1, 1};
  EXPECT_TRUE(IsError(typed_internal::Lookup(**bundle, rank), Code::kFailedPrecondition,
                      {"'saxpy'", "header 'k.h'", "operand 'y' is rank 1", "regenerate"}));
  EXPECT_TRUE(IsError(typed_internal::Lookup(**bundle, arity), Code::kFailedPrecondition,
                      {"takes 2 inputs, 1 outputs and 1 scalars"}));
  alignas(16) static float x[8], y[8], out[8];
  TensorRef<float, 1> tx(x, {5}), ty(y, {5}), tout(out, {6});
  TensorRef<const float, 1> cx = tx;  // T -> const T converts
  const BufferView in[] = {cx.view(), ty.view()};
  const BufferView outs[] = {tout.view()};
  const abi::Slot sc[] = {typed_internal::Scalar<float>(2.5f)};
  typed_internal::Cache cache;
  ASSERT_TRUE(IsOk(typed_internal::Run(**bundle, right, cache, nullptr, {in, 2},
                                       {outs, 1}, {sc, 1})));
  EXPECT_EQ(cache.bundle_id, (*bundle)->id());
  ASSERT_EQ(fake.runs.size(), 1u);
  EXPECT_EQ(fake.runs[0].slots[1].i32, 5);
  EXPECT_EQ(fake.runs[0].slots[6].f32, 2.5f);
  EXPECT_EQ(typed_internal::Scalar<int8_t>(-1).i64, -1);
  EXPECT_EQ(typed_internal::Scalar<uint32_t>(0xFFFFFFFFu).i64, 0xFFFFFFFFll);
  // Too few extents: refused by the rank check.
  TensorRef<float, 2> short_dims(x, {4});
  EXPECT_EQ(short_dims.view().rank, 1);
}

}  // namespace
}  // namespace cutecall
