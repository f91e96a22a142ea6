// Builds encoded launch plans for tests, mirroring the encoding documented in
// cutecall/abi.h (version 3; older when PlanSpec::version says so):
//   header:  [version, num_args, num_rets, num_operands, num_scalars]
//   operand: [source, index, rank, elem_bytes, align, flags,
//             n_static, (dim, value) * n_static,
//             n_dyn_shape, (dim, divisibility, symbol) * n_dyn_shape,
//             n_dyn_stride, (dim, divisibility) * n_dyn_stride,
//             n_static_stride, (dim, stride) * n_static_stride]
// Version 2 has no static-stride list; version 1 also writes dynamic-shape
// entries as (dim, divisibility) pairs.
#ifndef CUTECALL_TESTS_PLAN_BUILDER_H_
#define CUTECALL_TESTS_PLAN_BUILDER_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "cutecall/abi.h"

namespace cutecall_test {

using Rules = std::vector<std::pair<int64_t, int64_t>>;  // (dim, value)

struct OperandSpec {
  int64_t source = int64_t(cutecall::abi::Source::kArg);
  int64_t index = 0;
  int64_t rank = 0;
  int64_t elem_bytes = 4;
  int64_t align = 1;
  int64_t flags = 0;
  Rules static_dims;  // (dim, extent)
  Rules dyn_shape;    // (dim, divisibility)
  Rules dyn_stride;   // (dim, divisibility)
  Rules static_stride;  // (dim, stride); version 3
  // Symbol of dyn_shape[j] (version 2); entries past its end are -1.
  std::vector<int64_t> dyn_symbols;
};

struct PlanSpec {
  int64_t version = cutecall::abi::kPlanVersion;
  int64_t num_args = 0;
  int64_t num_rets = 0;
  std::optional<int64_t> num_operands;  // default: operands.size()
  int64_t num_scalars = 0;
  std::vector<OperandSpec> operands;
};

inline std::vector<int64_t> Encode(const PlanSpec& plan) {
  std::vector<int64_t> out = {
      plan.version, plan.num_args, plan.num_rets,
      plan.num_operands.value_or(int64_t(plan.operands.size())),
      plan.num_scalars};
  // `symbols` is null for rules without symbols.
  auto put_rules = [&out](const Rules& rules,
                          const std::vector<int64_t>* symbols) {
    out.push_back(int64_t(rules.size()));
    for (size_t j = 0; j < rules.size(); ++j) {
      out.push_back(rules[j].first);
      out.push_back(rules[j].second);
      if (symbols != nullptr) {
        out.push_back(j < symbols->size() ? (*symbols)[j]
                                          : cutecall::abi::kNoSymbol);
      }
    }
  };
  for (const OperandSpec& op : plan.operands) {
    out.insert(out.end(), {op.source, op.index, op.rank, op.elem_bytes,
                           op.align, op.flags});
    put_rules(op.static_dims, nullptr);
    put_rules(op.dyn_shape, plan.version >= 2 ? &op.dyn_symbols : nullptr);
    put_rules(op.dyn_stride, nullptr);
    if (plan.version >= 3) put_rules(op.static_stride, nullptr);
  }
  return out;
}

// A compact operand whose dims are all dynamic with divisibility 1.
inline OperandSpec DynamicOperand(cutecall::abi::Source source, int64_t index,
                                  int64_t rank) {
  OperandSpec op;
  op.source = int64_t(source);
  op.index = index;
  op.rank = rank;
  for (int64_t d = 0; d < rank; ++d) op.dyn_shape.push_back({d, 1});
  return op;
}

// saxpy, out = f(x, y, alpha): two rank-1 dynamic inputs, a rank-1 dynamic
// output and one runtime scalar (the bundle tests' and the fuzz corpus' plan).
inline PlanSpec SaxpySpec() {
  PlanSpec p;
  p.num_args = 2;
  p.num_rets = 1;
  p.num_scalars = 1;
  p.operands = {DynamicOperand(cutecall::abi::Source::kArg, 0, 1),
                DynamicOperand(cutecall::abi::Source::kArg, 1, 1),
                DynamicOperand(cutecall::abi::Source::kRet, 0, 1)};
  return p;
}

}  // namespace cutecall_test

#endif  // CUTECALL_TESTS_PLAN_BUILDER_H_
