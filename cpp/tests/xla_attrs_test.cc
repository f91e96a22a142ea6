// Reading the custom call's attributes at instantiate (xla_ffi_attrs.h):
// dictionaries built the way XLA passes them, decoded, then instantiated.
#include "xla_ffi_attrs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "call_state.h"
#include "sha256.h"
#include "ffi_attrs.h"
#include "plan_builder.h"
#include "test_util.h"

namespace cutecall {
namespace {

namespace ffi = ::xla::ffi;
using abi::Source;
using cutecall_test::DynamicOperand;
using cutecall_test::Encode;
using cutecall_test::FfiAttrs;
using cutecall_test::IsError;
using cutecall_test::IsOk;
using cutecall_test::PlanSpec;
using xla_ffi::DecodeAttributes;

const char kModule[] = "stand-in object bytes";

// out = f(x) with one runtime scalar: every attribute, as JAX lowers it.
FfiAttrs Complete() {
  PlanSpec p;
  p.num_args = 1;
  p.num_rets = 1;
  p.num_scalars = 1;
  p.operands = {DynamicOperand(Source::kArg, 0, 1),
                DynamicOperand(Source::kRet, 0, 1)};
  FfiAttrs a;
  a.String("module", kModule);
  a.String("key", ToHex(Sha256(kModule)));
  a.String("function", "cc_test");
  a.String("kernel", "scale");
  a.I64Array("plan", Encode(p));
  a.String("operands", "x,out");
  a.I64Array("scalars", {42});
  a.String("symbols", "");
  return a;
}

Status Decode(FfiAttrs& a, CallAttributes* out) {
  return DecodeAttributes(ffi::Dictionary(a.Build()), out);
}

TEST(XlaAttrsTest, DecodesEveryAttributeAsViewsIntoTheDictionary) {
  FfiAttrs a = Complete();
  CallAttributes c;
  ASSERT_TRUE(IsOk(Decode(a, &c)));
  EXPECT_EQ(c.module, kModule);
  EXPECT_EQ(c.key, ToHex(Sha256(kModule)));
  EXPECT_EQ(c.function, "cc_test");
  EXPECT_EQ(c.kernel, "scale");
  EXPECT_EQ(c.operand_names, "x,out");
  EXPECT_EQ(c.symbol_names, "");
  ASSERT_EQ(c.num_scalars, 1u);
  EXPECT_EQ(c.scalars[0], 42);
  ASSERT_GE(c.plan_size, abi::kHeaderSize);
  EXPECT_EQ(c.plan[0], abi::kPlanVersion);
  ErrorOr<std::unique_ptr<CallState>> state = CallState::Instantiate(c);
  ASSERT_TRUE(IsOk(state));
  EXPECT_EQ(state.value()->plan().num_scalars(), 1u);
}

TEST(XlaAttrsTest, Version1ArtifactsLackScalarsAndSymbols) {
  FfiAttrs a = Complete();
  PlanSpec p;
  p.version = 1;
  p.num_args = 1;
  p.operands = {DynamicOperand(Source::kArg, 0, 2)};
  a.I64Array("plan", Encode(p));
  a.String("operands", "x");
  a.Erase("scalars");
  a.Erase("symbols");
  CallAttributes c;
  ASSERT_TRUE(IsOk(Decode(a, &c)));
  EXPECT_EQ(c.num_scalars, 0u);
  EXPECT_TRUE(c.symbol_names.empty());
  EXPECT_TRUE(IsOk(CallState::Instantiate(c)));
}

TEST(XlaAttrsTest, AMissingAttributeIsNamed) {
  for (const char* name :
       {"module", "key", "function", "kernel", "plan", "operands"}) {
    FfiAttrs a = Complete();
    a.Erase(name);
    CallAttributes c;
    EXPECT_TRUE(IsError(Decode(a, &c), Code::kInvalidArgument,
                        {"lacks attribute '", name}))
        << name;
  }
  FfiAttrs empty;
  CallAttributes c;
  EXPECT_TRUE(IsError(Decode(empty, &c), Code::kInvalidArgument,
                      {"lacks attribute 'module'"}));
}

TEST(XlaAttrsTest, AnAttributeOfTheWrongTypeIsNamed) {
  struct Case {
    const char* name;
    void (*change)(FfiAttrs&);
  };
  const Case cases[] = {
      {"plan", [](FfiAttrs& a) { a.I32Array("plan", {3, 0, 0, 0, 0}); }},
      {"plan", [](FfiAttrs& a) { a.String("plan", "3 0 0 0 0"); }},
      {"module", [](FfiAttrs& a) { a.I64Scalar("module", 1); }},
      {"key", [](FfiAttrs& a) { a.EmptyDictionary("key"); }},
      {"scalars", [](FfiAttrs& a) { a.I64Scalar("scalars", 42); }},
      {"symbols", [](FfiAttrs& a) { a.I64Array("symbols", {}); }},
  };
  for (const Case& k : cases) {
    FfiAttrs a = Complete();
    k.change(a);
    CallAttributes c;
    EXPECT_TRUE(IsError(Decode(a, &c), Code::kInvalidArgument,
                        {"attribute '", k.name, "': "}))
        << k.name;
  }
}

TEST(XlaAttrsTest, EmptyArraysDecodeAndInstantiateRefusesThem) {
  FfiAttrs a = Complete();
  a.I64Array("plan", {});
  a.I64Array("scalars", {});
  CallAttributes c;
  ASSERT_TRUE(IsOk(Decode(a, &c)));
  EXPECT_EQ(c.plan_size, 0u);
  EXPECT_EQ(c.num_scalars, 0u);
  EXPECT_TRUE(IsError(CallState::Instantiate(c), Code::kInvalidArgument,
                      {"kernel 'scale'", "truncated header"}));
}

TEST(XlaAttrsTest, UnknownAttributesAreIgnored) {
  FfiAttrs a = Complete();
  a.String("aaa", "first in order");
  a.I64Scalar("zzz", 7);
  CallAttributes c;
  ASSERT_TRUE(IsOk(Decode(a, &c)));
  EXPECT_TRUE(IsOk(CallState::Instantiate(c)));
}

}  // namespace
}  // namespace cutecall
