// cutecall/launch_plan.h — how one call site packs its operands.
//
// Owns: a parsed, validated launch plan (built once per call site: XLA
// instantiate, a torch launch object, a bundle entry) and the per-call
// packing of buffers into abi::Slot storage.
// Contract: Parse validates everything that can be validated without data;
// PackOperand performs only the checks that need the buffer (rank, static
// extents, divisibility, alignment, int32 range), allocates nothing, and
// names the kernel, the operand and the value in every error.
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

struct DimRule {
  int32_t dim;
  int64_t value;  // static extent, or divisibility for dynamic dims
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
  size_t first_slot = 0;
  std::string name;
};

class LaunchPlan {
 public:
  // `names` is a comma-separated list, one per operand (may be empty).
  static ErrorOr<LaunchPlan> Parse(const int64_t* encoded, size_t size,
                                   std::string kernel_name,
                                   std::string_view names = {});

  // Writes operand `i`'s slots. `buffer` must be the buffer the plan names.
  Status PackOperand(size_t i, const BufferView& buffer,
                     abi::Slot* slots) const;

  size_t num_args() const { return num_args_; }
  size_t num_rets() const { return num_rets_; }
  size_t num_slots() const { return num_slots_; }
  const std::vector<OperandPlan>& operands() const { return operands_; }
  const std::string& kernel_name() const { return kernel_name_; }

 private:
  Status OperandError(const OperandPlan& op, const std::string& what) const;

  size_t num_args_ = 0;
  size_t num_rets_ = 0;
  size_t num_slots_ = 0;
  std::vector<OperandPlan> operands_;
  std::string kernel_name_;
};

}  // namespace cutecall

#endif  // CUTECALL_LAUNCH_PLAN_H_
