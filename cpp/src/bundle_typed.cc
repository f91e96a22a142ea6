// bundle_typed.cc — the lookup behind generated typed headers
// (cutecall/tensor_ref.h): the entry, checked against the header.
#include <string>

#include "cutecall/bundle.h"
#include "cutecall/tensor_ref.h"

namespace cutecall::typed_internal {

ErrorOr<const BundleKernel*> Lookup(const Bundle& bundle, const Expect& e) {
  ErrorOr<const BundleKernel*> found = bundle.Find(e.name);
  if (!found.ok()) return found;
  const BundleKernel* k = found.value();
  const LaunchPlan& plan = k->plan();
  auto stale = [&](const std::string& what) {
    return FailedPrecondition(
        "cutecall: kernel '" + std::string(e.name) + "' of bundle '" +
        bundle.path() + "' does not match the header '" + e.header +
        "' it is called through: " + what +
        " (regenerate the header with cutecall export --header)");
  };
  if (plan.num_args() != e.num_inputs || plan.num_rets() != e.num_outputs ||
      plan.num_scalars() != e.num_scalars) {
    return stale("the bundle's entry takes " + std::to_string(plan.num_args()) +
                 " inputs, " + std::to_string(plan.num_rets()) + " outputs and " +
                 std::to_string(plan.num_scalars()) + " scalars, the header " +
                 std::to_string(e.num_inputs) + ", " +
                 std::to_string(e.num_outputs) + " and " +
                 std::to_string(e.num_scalars));
  }
  for (const OperandPlan& op : plan.operands()) {
    const size_t i = op.source == abi::Source::kArg
                         ? size_t(op.index)
                         : e.num_inputs + size_t(op.index);
    if (op.rank != e.ranks[i] || op.elem_bytes != e.elem_bytes[i]) {
      return stale("operand '" + op.name + "' is rank " +
                   std::to_string(op.rank) + " of " +
                   std::to_string(op.elem_bytes) + "-byte elements, the "
                   "header says rank " + std::to_string(e.ranks[i]) + " of " +
                   std::to_string(e.elem_bytes[i]) + "-byte elements");
    }
  }
  return k;
}

}  // namespace cutecall::typed_internal
