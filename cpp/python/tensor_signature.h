// tensor_signature.h — what a launch object's specialization depends on,
// read from one call's tensors.
//
// Owns: the layout facts of a DLPack tensor that a compiled kernel may
// assume (unit-stride dim, pointer alignment, 64-bit extents, and the
// divisibility class of every extent and stride: the largest power of two
// dividing it, capped at 16 bytes' worth of elements), and their encoding
// into the launcher's signature words. Python's `_layout` module is the
// other half of this contract (`_core.layout_props` exposes these functions
// so both are tested against each other).
// Contract: two calls whose signatures are equal may share a compiled
// kernel; nothing here allocates or touches Python.
#ifndef CUTECALL_PYTHON_TENSOR_SIGNATURE_H_
#define CUTECALL_PYTHON_TENSOR_SIGNATURE_H_

#include <cstddef>
#include <cstdint>

#include "cutecall/abi.h"
#include "dlpack_exchange.h"

namespace cutecall::py {

// Signature tags, the low byte of a leaf's (or container's) first word.
inline constexpr int64_t kTagTensor = 1, kTagBool = 2, kTagInt = 3,
                         kTagFloat = 4, kTagNone = 5,
                         // Pytree arguments (tensor_launcher.h): containers
                         // (tuple, list, dict, a registered dataclass) and
                         // the leaves only objects make (a CuTe DSL value,
                         // a compile-time value).
                         kTagSequence = 6, kTagDict = 7, kTagNode = 8,
                         kTagDslScalar = 9, kTagConst = 10;
// Words a tensor takes in a signature, before any exact extents/strides.
inline constexpr size_t kTensorWords = 3;
// The most words one argument can take: 3 + rank extents + rank strides.
inline constexpr size_t kMaxArgWords = kTensorWords + 2 * abi::kMaxRank;

struct LayoutProps {
  int unit_dim = -1;  // the dim with stride 1 (and extent > 1), or -1
  int align = 16;     // pointer alignment in bytes, at most 16
  bool wide = false;  // some extent needs 64 bits
  // Two indices may reach one element (a zero stride on an extent > 1, as
  // expand() makes, or strides that interleave, as as_strided can): such a
  // tensor must not be written. Conservative: true means "may overlap".
  bool overlap = false;
  int32_t rank = 0;
  uint8_t extent_log2[abi::kMaxRank] = {};  // log2 of each extent's class
  uint8_t stride_log2[abi::kMaxRank] = {};  // log2 of each stride's class
};

// log2 of the largest power of two dividing `value`, at most `cap_log2`
// (0 is divisible by everything: `cap_log2`).
int ClassLog2(int64_t value, int cap_log2);

// log2 of 16 bytes' worth of elements of `dtype` (at least 0).
int CapLog2(const dlpack::DataType& dtype);

LayoutProps ReadLayout(const dlpack::Tensor& t);

// Whether two indices of a tensor with these extents and strides may reach
// one element: a zero stride on an extent > 1, or (dims of extent > 1 in
// increasing stride order) a stride not past the span of the smaller ones.
bool MayOverlap(const int64_t* shape, const int64_t* strides, int ndim);

// Which extents (bit d) and strides (bit kStaticStrideShift + d) a kernel
// compiled in: their exact values join the signature. The one form of
// "compiled in" in cutecall: the compile driver's masks are these
// (`_core.STATIC_STRIDE_SHIFT`).
using StaticMask = uint16_t;
inline constexpr int kStaticStrideShift = 8;
static_assert(abi::kMaxRank <= kStaticStrideShift);

// Appends tensor `t`'s words to `out` (room for kMaxArgWords); returns how
// many were written. A nonzero `mask` appends the values it names
// (AppendStaticValues); the torch launcher passes 0 and keeps each entry's
// compiled-in values in its key instead (call_key.h).
size_t AppendTensorSignature(const dlpack::Tensor& t, StaticMask mask,
                             int64_t* out);

// Appends the extents, then the strides, that `mask` names (bits past
// `t`'s rank ignored; the stride of a dim of extent <= 1 as 0: it has no
// meaningful one) to `out` (room for 2 * rank); returns how many.
size_t AppendStaticValues(const dlpack::Tensor& t, StaticMask mask,
                          int64_t* out);

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_TENSOR_SIGNATURE_H_
