// An entry's key in the torch launcher (cpp/python/call_key.h): a
// specialization whose KernelEntry carries static masks is registered from
// the one description of the call that missed, and matches later calls by
// their words and compiled-in values, without describing any call again.
// No Python needed.
#include "../python/call_key.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace cutecall::py {
namespace {

struct Tensor {
  std::vector<int64_t> shape, strides;
};

// Describes a call of tensors and number leaves once, as the launcher does
// (mask-independent words), counting the descriptions.
struct Describer {
  int count = 0;
  void Describe(std::vector<Tensor>& args, CallWords* call) {
    ++count;
    call->n = 0;
    call->sig_len = 0;
    for (Tensor& a : args) {
      const size_t i = call->n++;
      call->arg_at[i] = call->sig_len;
      if (a.shape.empty()) {  // a number leaf
        call->signature[call->sig_len++] = kTagInt;
        call->signature[call->sig_len++] = 0;
        continue;
      }
      dlpack::Tensor& t = call->tensors[i];
      t = dlpack::Tensor{};
      t.data = reinterpret_cast<void*>(uintptr_t(0x10000));
      t.device = {dlpack::kDLCUDA, 0};
      t.ndim = int32_t(a.shape.size());
      t.dtype = {2, 32, 1};
      t.shape = a.shape.data();
      t.strides = a.strides.data();
      call->sig_len += AppendTensorSignature(t, 0, call->signature + call->sig_len);
    }
  }
};

TEST(CallKeyTest, StaticMasksRegisterAndMatchWithoutASecondDescribe) {
  Describer d;
  std::vector<Tensor> args = {{{1000, 16}, {16, 1}}, {{1000}, {1}}, {}};
  CallWords missed;
  d.Describe(args, &missed);
  // The entry compiled x's dim 1 in (bit 1), as the static fallback does.
  const std::vector<StaticMask> masks = {0b10, 0, 0};
  ErrorOr<CallKey> key = CallKey::Make(missed, masks.data(), masks.size());
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_EQ(d.count, 1);  // registered from the one description
  EXPECT_TRUE(key->has_static());
  EXPECT_TRUE(key->Matches(missed));

  // Another row count of the same class: the same entry.
  std::vector<Tensor> more = {{{1008, 16}, {16, 1}}, {{1008}, {1}}, {}};
  CallWords call;
  d.Describe(more, &call);
  EXPECT_TRUE(key->Matches(call));
  // The compiled-in extent differs (16 -> 8): a miss, though the words of
  // both calls are equal (8 and 16 are one divisibility class for int32).
  std::vector<Tensor> narrow = {{{1000, 8}, {8, 1}}, {{1000}, {1}}, {}};
  CallWords other;
  d.Describe(narrow, &other);
  EXPECT_EQ(std::vector<int64_t>(call.signature, call.signature + call.sig_len),
            std::vector<int64_t>(other.signature, other.signature + other.sig_len))
      << "the words must not depend on the masks";
  EXPECT_FALSE(key->Matches(other));
  EXPECT_EQ(d.count, 3);  // each call described once
}

TEST(CallKeyTest, StaticStridesAndNoMasks) {
  Describer d;
  std::vector<Tensor> args = {{{4, 8}, {8, 1}}};
  CallWords call;
  d.Describe(args, &call);
  ErrorOr<CallKey> none = CallKey::Make(call, nullptr, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_static());
  const StaticMask stride0 = StaticMask(1u << kStaticStrideShift);
  ErrorOr<CallKey> strided = CallKey::Make(call, &stride0, 1);
  ASSERT_TRUE(strided.ok());
  std::vector<Tensor> padded = {{{4, 8}, {16, 1}}};  // row stride 16, same class
  CallWords p;
  d.Describe(padded, &p);
  EXPECT_TRUE(none->Matches(p));
  EXPECT_FALSE(strided->Matches(p));
  EXPECT_TRUE(strided->Matches(call));
  // Bits past the rank name nothing: every extent and stride of a rank-2
  // tensor is what 0xffff compiles in.
  const StaticMask every = 0xffff;
  ErrorOr<CallKey> all = CallKey::Make(call, &every, 1);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Matches(call));
  EXPECT_FALSE(all->Matches(p));
}

TEST(CallKeyTest, RefusesMasksThatNameNoTensor) {
  Describer d;
  std::vector<Tensor> args = {{{4}, {1}}, {}};
  CallWords call;
  d.Describe(args, &call);
  const std::vector<StaticMask> on_number = {0, 1};
  EXPECT_FALSE(CallKey::Make(call, on_number.data(), 2).ok());
  const std::vector<StaticMask> too_many = {1, 0, 0};
  EXPECT_FALSE(CallKey::Make(call, too_many.data(), 3).ok());
  // A different number of leaves never matches.
  ErrorOr<CallKey> key = CallKey::Make(call, nullptr, 0);
  std::vector<Tensor> fewer = {{{4}, {1}}};
  CallWords f;
  d.Describe(fewer, &f);
  EXPECT_FALSE(key->Matches(f));
}

}  // namespace
}  // namespace cutecall::py
