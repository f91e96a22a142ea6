#include "tensor_signature.h"

#include <cstdlib>

#include <limits>

namespace cutecall::py {
namespace {

constexpr int kAlignCapLog2 = 4;  // pointers: at most 16 bytes

int LowBitAlign(uintptr_t address) {
  return 1 << ClassLog2(int64_t(address), kAlignCapLog2);
}

const int64_t* StridesOf(const dlpack::Tensor& t, int64_t* compact) {
  if (t.strides != nullptr) return t.strides;
  int64_t acc = 1;
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    compact[d] = acc;
    acc *= t.shape[d];
  }
  return compact;
}

}  // namespace

int ClassLog2(int64_t value, int cap_log2) {
  const uint64_t v = uint64_t(value);  // two's complement: same low bits
  if (v == 0) return cap_log2;
  const int k = __builtin_ctzll(v);
  return k < cap_log2 ? k : cap_log2;
}

int CapLog2(const dlpack::DataType& dtype) {
  const int bits = int(dtype.bits) * int(dtype.lanes == 0 ? 1 : dtype.lanes);
  int cap = 0;
  while (bits > 0 && (bits << (cap + 1)) <= 128) ++cap;
  return cap;
}

LayoutProps ReadLayout(const dlpack::Tensor& t) {
  LayoutProps p;
  p.rank = t.ndim;
  p.align = LowBitAlign(reinterpret_cast<uintptr_t>(t.data) + t.byte_offset);
  int64_t compact[abi::kMaxRank];
  const int64_t* strides = StridesOf(t, compact);
  bool any_extent = false;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] > 1) {
      any_extent = true;
      if (strides[d] == 1 && p.unit_dim < 0) p.unit_dim = d;
    }
  }
  if (!any_extent) p.unit_dim = t.ndim - 1;
  const int cap = CapLog2(t.dtype);
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] > std::numeric_limits<int32_t>::max()) p.wide = true;
    p.extent_log2[d] = uint8_t(ClassLog2(t.shape[d], cap));
    p.stride_log2[d] = uint8_t(ClassLog2(strides[d], cap));
  }
  p.overlap = MayOverlap(t.shape, strides, t.ndim);
  return p;
}

bool MayOverlap(const int64_t* shape, const int64_t* strides, int ndim) {
  int order[abi::kMaxRank];
  int n = 0;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] <= 1) continue;
    if (strides[d] == 0) return true;
    int k = n++;  // insertion sort by |stride| (rank <= kMaxRank)
    while (k > 0 && std::llabs(strides[order[k - 1]]) > std::llabs(strides[d])) {
      order[k] = order[k - 1];
      --k;
    }
    order[k] = d;
  }
  int64_t span = 0;  // the largest offset the smaller-stride dims reach
  for (int i = 0; i < n; ++i) {
    const int d = order[i];
    const int64_t stride = std::llabs(strides[d]);
    if (stride <= span) return true;
    span += (shape[d] - 1) * stride;
  }
  return false;
}

size_t AppendTensorSignature(const dlpack::Tensor& t, StaticMask mask,
                             int64_t* out) {
  const LayoutProps p = ReadLayout(t);
  size_t n = 0;
  out[n++] = kTagTensor | int64_t(t.dtype.code) << 8 |
             int64_t(t.dtype.bits) << 16 | int64_t(t.dtype.lanes) << 24 |
             int64_t(t.ndim) << 40 | int64_t(p.unit_dim + 1) << 48;
  out[n++] = int64_t(p.align) | int64_t(p.wide) << 8 | int64_t(p.overlap) << 9 |
             int64_t(t.device.device_id) << 16;
  int64_t classes = 0;
  for (int d = 0; d < t.ndim; ++d) {
    classes |= int64_t(p.extent_log2[d]) << (8 * d);
    classes |= int64_t(p.stride_log2[d]) << (8 * d + 4);
  }
  out[n++] = classes;
  if (mask != 0) n += AppendStaticValues(t, mask, out + n);
  return n;
}

size_t AppendStaticValues(const dlpack::Tensor& t, StaticMask mask,
                          int64_t* out) {
  int64_t compact[abi::kMaxRank];
  const int64_t* strides = StridesOf(t, compact);
  size_t n = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (mask & (1u << d)) out[n++] = t.shape[d];
  }
  for (int d = 0; d < t.ndim; ++d) {
    // A dim of extent <= 1 has no meaningful stride: 0 in the signature.
    if (mask & (1u << (kStaticStrideShift + d))) {
      out[n++] = t.shape[d] > 1 ? strides[d] : 0;
    }
  }
  return n;
}

}  // namespace cutecall::py
