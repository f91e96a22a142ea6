// Packing one operand's buffer into its ABI slots at call time
// (cutecall/launch_plan.h): LaunchPlan::PackOperand and its errors. Parsing
// the encoded plan is launch_plan_parse.cc's.
#include "cutecall/launch_plan.h"

#include <cstdint>
#include <limits>
#include <string>

namespace cutecall {

Status LaunchPlan::OperandError(const OperandPlan& op,
                                const std::string& what) const {
  return InvalidArgument("cutecall: kernel '" + kernel_name_ + "', " +
                         (op.source == abi::Source::kArg ? "input " : "output ") +
                         "'" + op.name + "': " + what);
}

Status LaunchPlan::TieError(const OperandPlan& op, const DimRule& r,
                            int64_t value, int64_t defined) const {
  const SymbolPlan& sym = symbols_[size_t(r.symbol)];
  return InvalidArgument(
      "cutecall: kernel '" + kernel_name_ + "': operand '" + op.name +
      "' dim " + std::to_string(r.dim) + " = " + std::to_string(value) +
      " must equal operand '" + operands_[sym.operand].name + "' dim " +
      std::to_string(sym.dim) + " = " + std::to_string(defined) +
      " (tied dim '" + sym.name + "')");
}

Status LaunchPlan::PackOperand(size_t i, const BufferView& buffer,
                               abi::Slot* slots) const {
  const OperandPlan& op = operands_[i];
  if (buffer.rank != op.rank) {
    return OperandError(op, "rank " + std::to_string(buffer.rank) +
                                " does not match the compiled rank " +
                                std::to_string(op.rank));
  }
  auto address = reinterpret_cast<uintptr_t>(buffer.data);
  if (address % uintptr_t(op.align) != 0) {
    return OperandError(op, "data pointer " + std::to_string(address) +
                                " is not aligned to " +
                                std::to_string(op.align) + " bytes");
  }
  for (const DimRule& r : op.static_dims) {
    if (buffer.dims[r.dim] != r.value) {
      return OperandError(op, "dim " + std::to_string(r.dim) + " is " +
                                  std::to_string(buffer.dims[r.dim]) +
                                  " but the kernel was compiled for " +
                                  std::to_string(r.value));
    }
  }
  abi::Slot* out = slots + op.first_slot;
  (out++)->ptr = buffer.data;
  const bool wide = (op.flags & abi::kFlagShape64) != 0;
  for (const DimRule& r : op.dyn_shape) {
    int64_t v = buffer.dims[r.dim];
    if (r.tied) {
      const SymbolPlan& sym = symbols_[size_t(r.symbol)];
      const abi::Slot& def = slots[sym.slot];
      const int64_t defined = sym.wide ? def.i64 : int64_t(def.i32);
      if (v != defined) return TieError(op, r, v, defined);
    }
    if (r.value > 1 && v % r.value != 0) {  // most dims: divisibility 1
      return OperandError(op, "dim " + std::to_string(r.dim) + " = " +
                                  std::to_string(v) +
                                  " is not divisible by " +
                                  std::to_string(r.value));
    }
    if (r.tied) continue;  // checked above; its symbol's slot holds the value
    if (wide) {
      (out++)->i64 = v;
    } else {
      if (v > std::numeric_limits<int32_t>::max()) {
        return OperandError(op, "dim " + std::to_string(r.dim) + " = " +
                                    std::to_string(v) +
                                    " does not fit the kernel's int32 shape");
      }
      abi::Slot s;
      s.i64 = 0;
      s.i32 = int32_t(v);
      *out++ = s;
    }
  }
  if (op.flags & abi::kFlagStrided) {
    // Null strides mean compact row-major: compute them, so that they are
    // checked like given ones.
    int64_t compact[abi::kMaxRank];
    const int64_t* strides = buffer.strides;
    if (strides == nullptr) {
      int64_t acc = 1;
      for (int32_t d = op.rank - 1; d >= 0; --d) {
        compact[d] = acc;
        // A stride past int64 describes no buffer (and is signed overflow).
        if (d > 0 && __builtin_mul_overflow(acc, buffer.dims[d], &acc)) {
          return OperandError(op, "dim " + std::to_string(d) + " = " +
                                      std::to_string(buffer.dims[d]) +
                                      " makes the compact strides overflow "
                                      "int64");
        }
      }
      strides = compact;
    }
    // A strided operand's dims without a stride slot have their stride
    // baked into the kernel: the static one, else 1 (a dim of extent <= 1
    // has no meaningful stride).
    size_t next = 0;
    for (int32_t d = 0; d < op.rank; ++d) {
      if (next < op.dyn_stride.size() && op.dyn_stride[next].dim == d) {
        ++next;
        continue;
      }
      int64_t expected = 1;
      for (const DimRule& r : op.static_stride) {
        if (r.dim == d) expected = r.value;
      }
      if (buffer.dims[d] > 1 && strides[d] != expected) {
        return OperandError(op, "stride of dim " + std::to_string(d) + " = " +
                                    std::to_string(strides[d]) +
                                    " but the kernel was compiled for " +
                                    (expected == 1
                                         ? std::string("a unit stride there")
                                         : "stride " +
                                               std::to_string(expected)));
      }
    }
    for (const DimRule& r : op.dyn_stride) {
      int64_t v = strides[r.dim];
      if (r.value > 1 && v % r.value != 0) {  // most dims: divisibility 1
        return OperandError(op, "stride of dim " + std::to_string(r.dim) +
                                    " = " + std::to_string(v) +
                                    " is not divisible by " +
                                    std::to_string(r.value));
      }
      (out++)->i64 = v;
    }
  }
  return Status::Ok();
}

}  // namespace cutecall
