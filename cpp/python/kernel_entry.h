// kernel_entry.h — the typed boundary between the compile driver (Python)
// and the C++ launchers: `_core.KernelEntry`, `_core.ArgUse` and the codes
// both languages share.
//
// Owns: one compiled kernel as C++ receives it (object bytes, their SHA-256,
// the function prefix, the kernel's name, the encoded launch plan, operand
// and symbol names), validated when it is built: the plan parses
// (LaunchPlan::Parse, once: a launcher registering the entry reuses it) and
// its slot count is known; and, for a launch object, how each call argument
// fills the plan (ArgUse) and which extents and strides of each tensor
// argument the kernel compiled in (static masks: the launcher keys the
// entry by their values). Fields are read by name on both sides, never by
// position.
// Contract: the codes below (UseKind, abi::ScalarType) are defined here and
// in abi.h only; Python reads them from `_core` (`_core.UseKind`,
// `_core.ScalarType`, `_core.SCALAR_TYPES`, `_core.PLAN_VERSION`) and a test
// pins their values, because compiled artifacts and bundles carry them.
#ifndef CUTECALL_PYTHON_KERNEL_ENTRY_H_
#define CUTECALL_PYTHON_KERNEL_ENTRY_H_

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cutecall/abi.h"
#include "call_state.h"
#include "cutecall/launch_plan.h"

namespace cutecall::py {

// How one call argument of a launch object reaches the kernel.
enum class UseKind : int32_t {
  kTensor = 0,  // a tensor operand the kernel reads
  kScalar = 1,  // a runtime scalar
  kIgnore = 2,  // not passed (None, or a value compiled in)
  kOutput = 3,  // a tensor operand the kernel writes (a launch whose
                // outputs are all empty does nothing)
  kConst = 4,   // a compile-time value: a call matches the entry only if
                // the leaf equals `value`
};

struct ArgUse {
  UseKind kind = UseKind::kIgnore;
  int32_t index = 0;  // the operand (tensors) or scalar slot (scalars)
  abi::ScalarType scalar_type = abi::ScalarType::kBoolean;  // scalars only
  nanobind::object value;  // kConst: the value compiled in
};

// A compiled kernel, as the driver hands it to C++. Immutable.
class KernelEntry {
 public:
  // Raises ValueError (naming the kernel) for a plan that does not parse.
  // `static_masks`: per call leaf, a StaticMask (tensor_signature.h; none:
  // every extent and stride is a runtime value).
  KernelEntry(nanobind::bytes module, std::string sha256, std::string function,
              std::string kernel, std::vector<int64_t> plan,
              std::string operand_names, std::string symbol_names,
              std::vector<ArgUse> uses, std::vector<uint16_t> static_masks);

  // The attributes CallState::Instantiate takes (views into this entry;
  // runtime scalars start as zeros, filled per launch).
  CallAttributes Attributes() const;

  // This entry with a launch object's uses and static masks, sharing the
  // module and the plan parsed when this one was built (no second parse).
  KernelEntry WithUses(std::vector<ArgUse> uses,
                       std::vector<uint16_t> static_masks) const;

  const nanobind::bytes& module() const { return module_; }
  const std::string& sha256() const { return sha256_; }
  const std::string& function() const { return function_; }
  const std::string& kernel() const { return kernel_; }
  const std::vector<int64_t>& plan() const { return plan_; }
  const std::string& operand_names() const { return operand_names_; }
  const std::string& symbol_names() const { return symbol_names_; }
  const std::vector<ArgUse>& uses() const { return uses_; }
  const std::vector<uint16_t>& static_masks() const { return static_masks_; }
  const LaunchPlan& parsed_plan() const { return parsed_; }
  size_t num_slots() const { return num_slots_; }
  size_t num_scalars() const { return zeros_.size(); }

 private:
  nanobind::bytes module_;
  std::string sha256_, function_, kernel_;
  std::vector<int64_t> plan_;
  std::string operand_names_, symbol_names_;
  std::vector<ArgUse> uses_;
  std::vector<uint16_t> static_masks_;
  LaunchPlan parsed_;
  std::vector<int64_t> zeros_;  // one per runtime scalar
  size_t num_slots_ = 0;
};

// Registers UseKind, ScalarType, SCALAR_TYPES, ArgUse, KernelEntry and the
// object check (`check_object`).
void BindKernelEntry(nanobind::module_& m);

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_KERNEL_ENTRY_H_
