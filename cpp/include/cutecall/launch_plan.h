// cutecall/launch_plan.h — how one call site packs its operands.
//
// Owns: a parsed, validated launch plan (built once per call site: XLA
// instantiate, a torch launch object, a bundle entry) and the per-call
// packing of buffers into abi::Slot storage.
// Contract: Parse validates everything that can be validated without data
// (plan versions 1 to 3); PackOperand performs only the checks that need the
// buffer (rank, static extents, divisibility, alignment, int32 range, tied
// dims), allocates nothing, and names the kernel, the operand and the value
// in every error. Scalar slots are filled by the caller (CallState), after
// the tensor slots: [first_scalar_slot(), num_slots()).
#ifndef CUTECALL_LAUNCH_PLAN_H_
#define CUTECALL_LAUNCH_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cutecall/abi.h"
#include "cutecall/status.h"

namespace cutecall {

// What a front end knows about one buffer at call time.
struct BufferView {
  void* data = nullptr;
  const int64_t* dims = nullptr;
  int64_t rank = 0;
  const int64_t* strides = nullptr;  // elements; nullptr means row-major compact
};

// Whether a buffer holds no element (some extent is 0).
inline bool IsEmpty(const BufferView& b) {
  for (int64_t d = 0; d < b.rank; ++d) {
    if (b.dims[d] == 0) return true;
  }
  return false;
}

struct DimRule {
  int32_t dim;
  int64_t value;  // static extent, or divisibility for dynamic dims
  // Dynamic shape rules only: the symbol (abi::kNoSymbol when the dim is its
  // own), and whether this is a later occurrence of it, which owns no slot
  // and is checked against the symbol's first occurrence.
  int32_t symbol = int32_t(abi::kNoSymbol);
  bool tied = false;
};

// A named dynamic extent shared by several dims; defined by its first
// occurrence in plan order.
struct SymbolPlan {
  std::string name;
  size_t operand = 0;  // defining occurrence
  int32_t dim = 0;
  size_t slot = 0;     // the slot it owns
  bool wide = false;   // the slot holds an int64 (else an int32)
};

struct OperandPlan {
  abi::Source source = abi::Source::kArg;
  int32_t index = 0;
  int32_t rank = 0;
  int32_t elem_bytes = 0;
  int64_t align = 1;
  int64_t flags = 0;
  std::vector<DimRule> static_dims;
  std::vector<DimRule> dyn_shape;
  std::vector<DimRule> dyn_stride;
  std::vector<DimRule> static_stride;  // value: the stride compiled in
  size_t first_slot = 0;
  std::string name;
};

class LaunchPlan {
 public:
  // `names` is a comma-separated list, one per operand; `symbol_names` one
  // per symbol; either may be empty (errors then use indices).
  static ErrorOr<LaunchPlan> Parse(const int64_t* encoded, size_t size,
                                   std::string kernel_name,
                                   std::string_view names = {},
                                   std::string_view symbol_names = {});

  // Writes operand `i`'s slots. `buffer` must be the buffer the plan names.
  // Operands are packed in order into the same `slots`: a tied dim compares
  // against the slot its symbol's first occurrence wrote.
  Status PackOperand(size_t i, const BufferView& buffer,
                     abi::Slot* slots) const;

  size_t num_args() const { return num_args_; }
  size_t num_rets() const { return num_rets_; }
  // All slots: tensor slots, then scalar slots.
  size_t num_slots() const { return num_slots_; }
  size_t num_scalars() const { return num_scalars_; }
  size_t first_scalar_slot() const { return num_slots_ - num_scalars_; }
  const std::vector<OperandPlan>& operands() const { return operands_; }
  const std::vector<SymbolPlan>& symbols() const { return symbols_; }
  const std::string& kernel_name() const { return kernel_name_; }

 private:
  Status OperandError(const OperandPlan& op, const std::string& what) const;
  Status TieError(const OperandPlan& op, const DimRule& r, int64_t value,
                  int64_t defined) const;

  size_t num_args_ = 0;
  size_t num_rets_ = 0;
  size_t num_slots_ = 0;
  size_t num_scalars_ = 0;
  std::vector<OperandPlan> operands_;
  std::vector<SymbolPlan> symbols_;
  std::string kernel_name_;
};

}  // namespace cutecall

#endif  // CUTECALL_LAUNCH_PLAN_H_
