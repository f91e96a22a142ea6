// Parsing and validating an encoded launch plan (cutecall/launch_plan.h):
// LaunchPlan::Parse, once per call site. Packing operands at call time is
// launch_plan.cc's.
#include "cutecall/launch_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cutecall {
namespace {

// Reads an encoded plan front to back; every read is bounds-checked.
class Cursor {
 public:
  Cursor(const int64_t* data, size_t size) : data_(data), size_(size) {}
  bool Next(int64_t* out) {
    if (pos_ >= size_) return false;
    *out = data_[pos_++];
    return true;
  }
  bool done() const { return pos_ == size_; }
  size_t pos() const { return pos_; }

 private:
  const int64_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

Status PlanError(const std::string& kernel, const std::string& what) {
  return InvalidArgument("cutecall: invalid launch plan for kernel '" + kernel +
                         "': " + what);
}

std::vector<std::string> SplitNames(std::string_view names) {
  std::vector<std::string> out;
  if (names.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = names.find(',', start);
    out.emplace_back(names.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// SymbolPlan::slot of a symbol not yet defined while parsing.
constexpr size_t kUnset = ~size_t{0};

// Reads one encoded operand (dynamic-shape entries are triples when
// `has_symbols`, pairs otherwise); `where` names it in errors. Fills all of
// `out` but its name, first slot and ties.
Status ReadOperand(Cursor* cursor, const std::string& k,
                   const std::string& where, int64_t num_args,
                   int64_t num_rets, int64_t version, OperandPlan* out) {
  const bool has_symbols = version >= 2;
  Cursor& c = *cursor;
  OperandPlan& op = *out;
  int64_t source, index, rank, elem_bytes, align, flags;
  if (!c.Next(&source) || !c.Next(&index) || !c.Next(&rank) ||
      !c.Next(&elem_bytes) || !c.Next(&align) || !c.Next(&flags)) {
    return PlanError(k, where + "truncated");
  }
  if (source != int64_t(abi::Source::kArg) &&
      source != int64_t(abi::Source::kRet)) {
    return PlanError(k, where + "source " + std::to_string(source) +
                            " is neither 0 (arg) nor 1 (result)");
  }
  op.source = abi::Source(source);
  int64_t bound = op.source == abi::Source::kArg ? num_args : num_rets;
  if (index < 0 || index >= bound) {
    return PlanError(k, where + "index " + std::to_string(index) +
                            " out of range [0, " + std::to_string(bound) +
                            ")");
  }
  if (rank < 0 || rank > abi::kMaxRank) {
    return PlanError(k, where + "rank " + std::to_string(rank) +
                            " out of range [0, " +
                            std::to_string(abi::kMaxRank) + "]");
  }
  if (elem_bytes <= 0 || elem_bytes > 64) {
    return PlanError(k, where + "element size " +
                            std::to_string(elem_bytes) + " is invalid");
  }
  if (!IsPowerOfTwo(align)) {
    return PlanError(k, where + "alignment " + std::to_string(align) +
                            " is not a power of two");
  }
  if ((flags & ~(abi::kFlagShape64 | abi::kFlagStrided)) != 0) {
    return PlanError(k, where + "unknown flags " + std::to_string(flags));
  }
  op.index = int32_t(index);
  op.rank = int32_t(rank);
  op.elem_bytes = int32_t(elem_bytes);
  op.align = align;
  op.flags = flags;

  bool seen[abi::kMaxRank] = {};
  // Reads `n, (dim, value[, symbol]) * n`; symbols only where `symbolic`.
  auto read_rules = [&](std::vector<DimRule>* rules, const char* what,
                        bool is_static, bool symbolic) -> Status {
    int64_t n;
    if (!c.Next(&n)) return PlanError(k, where + "truncated " + what);
    if (n < 0 || n > rank) {
      return PlanError(k, where + "bad " + what + " count " +
                              std::to_string(n));
    }
    for (int64_t j = 0; j < n; ++j) {
      int64_t dim, value, symbol = abi::kNoSymbol;
      if (!c.Next(&dim) || !c.Next(&value) ||
          (symbolic && !c.Next(&symbol))) {
        return PlanError(k, where + "truncated " + what);
      }
      if (dim < 0 || dim >= rank) {
        return PlanError(k, where + what + " dim " + std::to_string(dim) +
                                " out of range for rank " +
                                std::to_string(rank));
      }
      if (is_static ? value < 0 : value < 1) {
        return PlanError(k, where + what + " value " +
                                std::to_string(value) + " for dim " +
                                std::to_string(dim) + " is invalid");
      }
      // Every symbol owns a slot, so a valid index is below kMaxSlots.
      if (symbol < abi::kNoSymbol || symbol >= int64_t(abi::kMaxSlots)) {
        return PlanError(k, where + what + " symbol " +
                                std::to_string(symbol) + " for dim " +
                                std::to_string(dim) + " out of range [-1, " +
                                std::to_string(abi::kMaxSlots) + ")");
      }
      rules->push_back({int32_t(dim), value, int32_t(symbol)});
    }
    return Status::Ok();
  };
  if (Status s = read_rules(&op.static_dims, "static dims", true, false);
      !s.ok())
    return s;
  if (Status s = read_rules(&op.dyn_shape, "dynamic dims", false,
                            has_symbols);
      !s.ok())
    return s;
  for (const auto& rules : {&op.static_dims, &op.dyn_shape}) {
    for (const DimRule& r : *rules) {
      if (seen[r.dim]) {
        return PlanError(k, where + "dim " + std::to_string(r.dim) +
                                " is described twice");
      }
      seen[r.dim] = true;
    }
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (!seen[d]) {
      return PlanError(k, where + "dim " + std::to_string(d) +
                              " is neither static nor dynamic");
    }
  }
  if (Status s = read_rules(&op.dyn_stride, "dynamic strides", false, false);
      !s.ok())
    return s;
  if (!op.dyn_stride.empty() && !(flags & abi::kFlagStrided)) {
    return PlanError(k, where + "dynamic strides on a compact operand");
  }
  for (size_t j = 1; j < op.dyn_stride.size(); ++j) {
    if (op.dyn_stride[j].dim <= op.dyn_stride[j - 1].dim) {
      return PlanError(k, where + "dynamic strides must name dims in "
                                  "increasing order");
    }
  }
  if (version < 3) return Status::Ok();
  if (Status s = read_rules(&op.static_stride, "static strides", true, false);
      !s.ok())
    return s;
  if (!op.static_stride.empty() && !(flags & abi::kFlagStrided)) {
    return PlanError(k, where + "static strides on a compact operand");
  }
  for (const DimRule& r : op.static_stride) {
    for (const DimRule& d : op.dyn_stride) {
      if (d.dim == r.dim) {
        return PlanError(k, where + "stride of dim " + std::to_string(r.dim) +
                                " is both static and dynamic");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

ErrorOr<LaunchPlan> LaunchPlan::Parse(const int64_t* encoded, size_t size,
                                      std::string kernel_name,
                                      std::string_view names,
                                      std::string_view symbol_names) {
  LaunchPlan plan;
  plan.kernel_name_ = std::move(kernel_name);
  const std::string& k = plan.kernel_name_;
  if (encoded == nullptr && size != 0) return PlanError(k, "null data");
  Cursor c(encoded, size);
  int64_t version, num_args, num_rets, num_operands, num_scalars;
  if (!c.Next(&version) || !c.Next(&num_args) || !c.Next(&num_rets) ||
      !c.Next(&num_operands) || !c.Next(&num_scalars)) {
    return PlanError(k, "truncated header (" + std::to_string(size) +
                            " values)");
  }
  if (version < abi::kOldestPlanVersion || version > abi::kPlanVersion) {
    return PlanError(k, "version " + std::to_string(version) +
                            " is not supported (this build reads versions " +
                            std::to_string(abi::kOldestPlanVersion) + " to " +
                            std::to_string(abi::kPlanVersion) + ")");
  }
  constexpr int64_t kLimit = 1 << 16;
  if (num_args < 0 || num_args > kLimit || num_rets < 0 || num_rets > kLimit ||
      num_operands < 0 || num_operands > kLimit) {
    return PlanError(k, "operand counts out of range: num_args=" +
                            std::to_string(num_args) + ", num_rets=" +
                            std::to_string(num_rets) + ", num_operands=" +
                            std::to_string(num_operands));
  }
  if (version == 1 && num_scalars != 0) {
    return PlanError(k, "num_scalars must be 0 in plan version 1, got " +
                            std::to_string(num_scalars));
  }
  if (num_scalars < 0 || num_scalars > int64_t(abi::kMaxSlots)) {
    return PlanError(k, "num_scalars " + std::to_string(num_scalars) +
                            " out of range [0, " +
                            std::to_string(abi::kMaxSlots) + "]");
  }
  plan.num_args_ = size_t(num_args);
  plan.num_rets_ = size_t(num_rets);
  plan.num_scalars_ = size_t(num_scalars);
  std::vector<std::string> name_list = SplitNames(names);
  if (!name_list.empty() && name_list.size() != size_t(num_operands)) {
    return PlanError(k, std::to_string(name_list.size()) +
                            " operand names for " +
                            std::to_string(num_operands) + " operands");
  }

  size_t slot = 0;
  for (int64_t i = 0; i < num_operands; ++i) {
    OperandPlan op;
    op.name = name_list.empty() ? "operand " + std::to_string(i)
                                : name_list[size_t(i)];
    const std::string where = "operand " + std::to_string(i) + " ('" +
                              op.name + "'): ";
    if (Status s = ReadOperand(&c, k, where, num_args, num_rets, version,
                               &op);
        !s.ok())
      return s;
    // Slots: the pointer, each dynamic dim but a symbol's later occurrences
    // (which read back the first one's slot), each dynamic stride.
    const bool wide = (op.flags & abi::kFlagShape64) != 0;
    op.first_slot = slot++;
    for (DimRule& r : op.dyn_shape) {
      if (r.symbol != abi::kNoSymbol) {
        if (size_t(r.symbol) >= plan.symbols_.size()) {
          plan.symbols_.resize(size_t(r.symbol) + 1, {"", 0, 0, kUnset});
        }
        SymbolPlan& sym = plan.symbols_[size_t(r.symbol)];
        if (sym.slot != kUnset) {
          r.tied = true;
          continue;
        }
        sym = {"", size_t(i), r.dim, slot, wide};
      }
      ++slot;
    }
    slot += op.dyn_stride.size();
    if (slot > abi::kMaxSlots) {
      return PlanError(k, "more than " + std::to_string(abi::kMaxSlots) +
                              " ABI slots");
    }
    plan.operands_.push_back(std::move(op));
  }
  if (!c.done()) {
    return PlanError(k, "trailing data at position " + std::to_string(c.pos()));
  }
  for (size_t s = 0; s < plan.symbols_.size(); ++s) {
    if (plan.symbols_[s].slot == kUnset) {
      return PlanError(k, "symbols are not dense: symbol " +
                              std::to_string(s) + " never occurs, symbol " +
                              std::to_string(plan.symbols_.size() - 1) +
                              " does");
    }
  }
  std::vector<std::string> symbol_list = SplitNames(symbol_names);
  if (!symbol_list.empty() && symbol_list.size() != plan.symbols_.size()) {
    return PlanError(k, std::to_string(symbol_list.size()) +
                            " symbol names for " +
                            std::to_string(plan.symbols_.size()) + " symbols");
  }
  for (size_t s = 0; s < plan.symbols_.size(); ++s) {
    plan.symbols_[s].name =
        symbol_list.empty() ? "symbol " + std::to_string(s) : symbol_list[s];
  }
  if (slot + plan.num_scalars_ > abi::kMaxSlots) {
    return PlanError(k, "more than " + std::to_string(abi::kMaxSlots) +
                            " ABI slots (" + std::to_string(slot) +
                            " tensor slots and " +
                            std::to_string(plan.num_scalars_) + " scalars)");
  }
  plan.num_slots_ = slot + plan.num_scalars_;
  return plan;
}

}  // namespace cutecall
