// The torch launcher's signature words (cpp/python/tensor_signature.h): what
// makes two calls share a compiled kernel. No Python needed.
#include "../python/tensor_signature.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace cutecall::py {
namespace {

struct Fixture {
  std::vector<int64_t> shape, strides;
  dlpack::Tensor t{};
  Fixture(std::vector<int64_t> shape_, std::vector<int64_t> strides_,
          uintptr_t address, uint8_t bits = 16)
      : shape(std::move(shape_)), strides(std::move(strides_)) {
    t.data = reinterpret_cast<void*>(address);
    t.device = {dlpack::kDLCUDA, 0};
    t.ndim = int32_t(shape.size());
    t.dtype = {2, bits, 1};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
  std::vector<int64_t> Words(StaticMask mask = 0) const {
    std::vector<int64_t> out(kMaxArgWords, -7);
    out.resize(AppendTensorSignature(t, mask, out.data()));
    return out;
  }
};

TEST(TensorSignatureTest, ClassIsTheLowBitCapped) {
  EXPECT_EQ(ClassLog2(0, 3), 3);
  EXPECT_EQ(ClassLog2(1, 3), 0);
  EXPECT_EQ(ClassLog2(12, 3), 2);
  EXPECT_EQ(ClassLog2(4096, 3), 3);
  EXPECT_EQ(ClassLog2(-24, 4), 3);  // magnitude
  EXPECT_EQ(ClassLog2(INT64_MIN, 5), 5);
}

TEST(TensorSignatureTest, CapIsSixteenBytesOfElements) {
  EXPECT_EQ(CapLog2({2, 16, 1}), 3);   // bf16: 8 elements
  EXPECT_EQ(CapLog2({2, 32, 1}), 2);   // f32: 4
  EXPECT_EQ(CapLog2({1, 8, 1}), 4);    // int8: 16
  EXPECT_EQ(CapLog2({0, 4, 1}), 5);    // 4-bit: 32
  EXPECT_EQ(CapLog2({2, 64, 1}), 1);   // f64: 2
  EXPECT_EQ(CapLog2({2, 32, 4}), 0);   // 16-byte vectors: 1
}

TEST(TensorSignatureTest, ReadsUnitDimAlignmentAndClasses) {
  Fixture rows({1000, 4096}, {4096, 1}, 0x10000);
  LayoutProps p = ReadLayout(rows.t);
  EXPECT_EQ(p.unit_dim, 1);
  EXPECT_EQ(p.align, 16);
  EXPECT_FALSE(p.wide);
  EXPECT_EQ(p.extent_log2[0], 3);  // 1000 = 8 * 125
  EXPECT_EQ(p.stride_log2[0], 3);
  Fixture column({7, 3}, {1, 7}, 0x10006, 32);
  p = ReadLayout(column.t);
  EXPECT_EQ(p.unit_dim, 0);
  EXPECT_EQ(p.align, 2);
  EXPECT_EQ(p.extent_log2[0], 0);
  Fixture compact({5, 1}, {}, 0x10000);  // null strides: row-major
  EXPECT_EQ(ReadLayout(compact.t).unit_dim, 0);
  Fixture huge({int64_t{1} << 33}, {1}, 0x10000);
  EXPECT_TRUE(ReadLayout(huge.t).wide);
}

TEST(TensorSignatureTest, ShapesOfOneClassShareASignature) {
  Fixture a({1000, 4096}, {4096, 1}, 0x10000);
  Fixture b({8, 64}, {64, 1}, 0x20000);
  EXPECT_EQ(a.Words(), b.Words());
  EXPECT_EQ(a.Words().size(), kTensorWords);
  Fixture c({1001, 4096}, {4096, 1}, 0x10000);  // extent class 1
  EXPECT_NE(a.Words(), c.Words());
  Fixture d({1000, 4096}, {4100, 1}, 0x10000);  // stride class 4
  EXPECT_NE(a.Words(), d.Words());
  Fixture e({1000, 4096}, {4096, 1}, 0x10008);  // 8-byte pointer
  EXPECT_NE(a.Words(), e.Words());
}

TEST(TensorSignatureTest, MaskedExtentsAndStridesJoinExactly) {
  Fixture a({1000, 16}, {16, 1}, 0x10000);
  Fixture b({1008, 16}, {16, 1}, 0x10000);
  Fixture c({1000, 32}, {32, 1}, 0x10000);
  const StaticMask n_static = 0b10;  // extent of dim 1
  EXPECT_EQ(a.Words(n_static).size(), kTensorWords + 1);
  EXPECT_EQ(a.Words(n_static).back(), 16);
  EXPECT_EQ(a.Words(n_static), b.Words(n_static));  // M stays dynamic
  EXPECT_NE(a.Words(n_static), c.Words(n_static));
  const StaticMask all = 0xffff;
  std::vector<int64_t> w = a.Words(all);
  ASSERT_EQ(w.size(), kTensorWords + 4);
  EXPECT_EQ(std::vector<int64_t>(w.begin() + 3, w.end()),
            (std::vector<int64_t>{1000, 16, 16, 1}));
  // An extent-1 dim's stride means nothing: 0 in the signature.
  Fixture one({1, 16}, {999, 1}, 0x10000);
  Fixture other({1, 16}, {5, 1}, 0x10000);
  EXPECT_EQ(one.Words(all), other.Words(all));
}

TEST(TensorSignatureTest, OverlappingLayoutsAreFlaggedAndSignedApart) {
  auto overlap = [](std::vector<int64_t> shape, std::vector<int64_t> strides) {
    return MayOverlap(shape.data(), strides.data(), int(shape.size()));
  };
  EXPECT_FALSE(overlap({4, 4}, {4, 1}));      // row-major
  EXPECT_FALSE(overlap({4, 4}, {1, 4}));      // column-major
  EXPECT_FALSE(overlap({4, 4}, {8, 1}));      // padded rows
  EXPECT_FALSE(overlap({1, 5}, {0, 1}));      // a zero stride on extent 1
  EXPECT_FALSE(overlap({2, 2, 2}, {1, 2, 4}));
  EXPECT_TRUE(overlap({4, 4}, {0, 1}));       // expand() of a row
  EXPECT_TRUE(overlap({3}, {0}));
  EXPECT_TRUE(overlap({4, 4}, {1, 1}));       // as_strided sliding window
  EXPECT_TRUE(overlap({2, 3}, {2, 1}));       // rows overlap by one
  // A flagged tensor never shares a signature with an unflagged one.
  Fixture owned({4, 4}, {4, 1}, 0x10000);
  Fixture expanded({4, 4}, {0, 1}, 0x10000);
  EXPECT_NE(owned.Words(), expanded.Words());
}

}  // namespace
}  // namespace cutecall::py
