// cutecall/abi.h — the flat call ABI between cutecall and a compiled kernel.
//
// Owns: the layout of the packed argument array handed to
// CuteDSLRT_Function_Run, and the integer encoding of a launch plan as it
// travels in an XLA attribute, a bundle manifest or a Python call.
// Must not change without bumping kPlanVersion (and, where old artifacts
// could no longer be served, the FFI target suffix): compiled executables,
// jax.export artifacts and bundles carry these values.
// Documented for users in docs/abi.md.
//
// Packed arguments (every entry points at storage holding the value):
//   packed[0]              -> void*   stream (cudaStream_t)
//   packed[1 .. n]         -> Slot    one per flat ABI slot, in plan order
//   packed[n + 1]          -> int32_t CUDA status written by the launcher
// Slots: first, per tensor operand in kernel order, the data pointer, then
//   each dynamic shape value that owns a slot (plan order; int32 unless the
//   operand is flagged 64-bit), then each dynamic stride value (int64,
//   elements; only for strided operands); then the runtime scalars, one Slot
//   each, bytes as given at the call site.
#ifndef CUTECALL_ABI_H_
#define CUTECALL_ABI_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace cutecall::abi {

// The version this build writes; it reads kOldestPlanVersion..kPlanVersion.
inline constexpr int64_t kPlanVersion = 3;
inline constexpr int64_t kOldestPlanVersion = 1;
// Upper bound of flat slots per call; packing storage lives on the stack.
inline constexpr size_t kMaxSlots = 256;
inline constexpr int64_t kMaxRank = 8;

// One 8-byte cell per ABI slot. int32 values sit at offset 0 (little-endian
// hosts only: x86-64 and aarch64), so a pointer to the Slot is a valid
// pointer to the int32 the launcher reads.
union Slot {
  void* ptr;
  int32_t i32;
  int64_t i64;
  float f32;
  double f64;
  uint64_t bits;
};
static_assert(sizeof(Slot) == 8, "Slot must be 8 bytes");
static_assert(alignof(Slot) == 8, "Slot must be 8-byte aligned");
static_assert(offsetof(Slot, i32) == 0 && offsetof(Slot, i64) == 0 &&
                  offsetof(Slot, ptr) == 0,
              "every Slot member starts at offset 0");
static_assert(std::is_trivially_copyable_v<Slot>);

// Runtime scalar types, by code, in this order. Codes and names are shared
// with Python (`_core.ScalarType`, `_core.SCALAR_TYPES`: the compile driver
// reads them from here) and names are persisted (bundle manifests): append
// only, never reorder.
enum class ScalarType : int32_t {
  kBoolean = 0, kInt8, kInt16, kInt32, kInt64, kUint8, kUint16, kUint32,
  kUint64, kFloat32, kFloat64
};
inline constexpr int32_t kNumScalarTypes = 11;
inline constexpr const char* kScalarTypeNames[kNumScalarTypes] = {
    "Boolean", "Int8",   "Int16",  "Int32",   "Int64",  "Uint8",
    "Uint16",  "Uint32", "Uint64", "Float32", "Float64"};
static_assert(int32_t(ScalarType::kFloat64) + 1 == kNumScalarTypes);

// The ScalarType named `name`; false if none is.
inline bool ScalarTypeFromName(std::string_view name, ScalarType* out) {
  for (int32_t i = 0; i < kNumScalarTypes; ++i) {
    if (name == kScalarTypeNames[i]) {
      *out = ScalarType(i);
      return true;
    }
  }
  return false;
}

// Where a kernel tensor operand comes from in an XLA custom call.
enum class Source : int64_t { kArg = 0, kRet = 1 };

// Operand flags.
inline constexpr int64_t kFlagShape64 = 1 << 0;   // shape slots are int64
inline constexpr int64_t kFlagStrided = 1 << 1;   // stride slots follow

// Encoded plan, version 3 (all int64):
//   header:  [version, num_args, num_rets, num_operands, num_scalars]
//   operand: [source, index, rank, elem_bytes, align, flags,
//             n_static, (dim, value) * n_static,
//             n_dyn_shape, (dim, divisibility, symbol) * n_dyn_shape,
//             n_dyn_stride, (dim, divisibility) * n_dyn_stride,
//             n_static_stride, (dim, stride) * n_static_stride]
// `symbol` is kNoSymbol (the dim owns a slot) or an index into the call's
// symbol table, dense 0..S-1. A symbol's first occurrence in plan order
// (operands, then entries) owns a slot; later occurrences own none and must
// equal it at execute. Static strides (strided operands only) are compiled
// in; a strided operand's dims with neither a dynamic nor a static stride
// have stride 1. Version 2: no static-stride list. Version 1 also: dynamic-
// shape entries are (dim, divisibility) pairs, no symbols, num_scalars 0.
inline constexpr size_t kHeaderSize = 5;
inline constexpr size_t kOperandFixedSize = 6;
inline constexpr int64_t kNoSymbol = -1;

}  // namespace cutecall::abi

#endif  // CUTECALL_ABI_H_
