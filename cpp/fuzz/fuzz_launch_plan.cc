// Fuzz target: the launch-plan decoder, LaunchPlan::Parse
// (cpp/src/launch_plan_parse.cc), which reads int64 plans from XLA
// attributes, bundle manifests and Python calls; and LaunchPlan::PackOperand
// (cpp/src/launch_plan.cc) on every plan it accepts.
//
// Input (cpp/fuzz/corpus/launch_plan, written by make_corpus.cc):
//   operand names '\0' symbol names '\0'
//   uint16 n (little-endian), n int64 plan values (little-endian)
//   then int64 values that replace, in order, each operand's extents and
//   then the strides of strided operands (absent: extents and strides that
//   satisfy the plan). A strided operand whose first extent is odd is
//   passed without strides (compact).
// Beyond ASan/UBSan, checks the contract of an accepted plan: it fits
// kMaxSlots, every operand and symbol slot lies below the scalar slots, and
// packing an operand writes no slot but its own.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "cutecall/launch_plan.h"

namespace {

using cutecall::BufferView;
using cutecall::DimRule;
using cutecall::LaunchPlan;
using cutecall::OperandPlan;
namespace abi = cutecall::abi;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "launch plan contract broken: %s\n", what);
    std::abort();
  }
}

// Reads `n` little-endian int64 values from the front of `in`.
std::vector<int64_t> TakeValues(std::string_view* in, size_t n) {
  n = std::min(n, in->size() / 8);
  std::vector<int64_t> out(n);
  if (n != 0) std::memcpy(out.data(), in->data(), n * 8);
  in->remove_prefix(n * 8);
  return out;
}

int64_t Gcd(int64_t a, int64_t b) { return b == 0 ? a : Gcd(b, a % b); }

// An extent every dynamic dim of the plan accepts: twice the lcm of the
// divisibilities, or 2 when that exceeds 2^20 (then ties may fail).
int64_t CommonExtent(const LaunchPlan& plan) {
  int64_t lcm = 1;
  for (const OperandPlan& op : plan.operands()) {
    for (const DimRule& r : op.dyn_shape) {
      if (r.value > (1 << 20)) return 2;
      lcm = lcm / Gcd(lcm, r.value) * r.value;
      if (lcm > (1 << 20)) return 2;
    }
  }
  return 2 * lcm;
}

// How many slots operand `op` owns: its pointer, each untied dynamic dim,
// each dynamic stride.
size_t OwnSlots(const OperandPlan& op) {
  size_t n = 1 + op.dyn_stride.size();
  for (const DimRule& r : op.dyn_shape) n += r.tied ? 0 : 1;
  return n;
}

void CheckPlan(const LaunchPlan& plan) {
  Check(plan.num_slots() <= abi::kMaxSlots, "num_slots > kMaxSlots");
  Check(plan.first_scalar_slot() <= plan.num_slots(), "scalar slots");
  size_t expect = 0;
  for (const OperandPlan& op : plan.operands()) {
    Check(op.first_slot == expect, "operand slots are not consecutive");
    expect += OwnSlots(op);
    Check(op.rank >= 0 && op.rank <= abi::kMaxRank, "rank");
    size_t bound = op.source == abi::Source::kArg ? plan.num_args()
                                                  : plan.num_rets();
    Check(op.index >= 0 && size_t(op.index) < bound, "operand index");
  }
  Check(expect == plan.first_scalar_slot(), "tensor slot count");
  for (const cutecall::SymbolPlan& s : plan.symbols()) {
    Check(s.operand < plan.operands().size(), "symbol operand");
    Check(s.slot < plan.first_scalar_slot(), "symbol slot");
  }
}

// Packs every operand in order, as CallState::Execute does, and checks
// that each PackOperand writes only inside its own slots.
void PackAll(const LaunchPlan& plan, std::string_view tail) {
  const size_t num_ops = plan.operands().size();
  std::vector<int64_t> override_values = TakeValues(&tail, tail.size() / 8);
  size_t next = 0;
  const int64_t common = CommonExtent(plan);
  std::vector<std::vector<int64_t>> dims(num_ops), strides(num_ops);
  for (size_t i = 0; i < num_ops; ++i) {
    const OperandPlan& op = plan.operands()[i];
    dims[i].assign(size_t(op.rank), common);
    for (const DimRule& r : op.static_dims) dims[i][size_t(r.dim)] = r.value;
    for (int64_t& d : dims[i]) {
      if (next < override_values.size()) d = override_values[next++];
    }
  }
  for (size_t i = 0; i < num_ops; ++i) {
    const OperandPlan& op = plan.operands()[i];
    if (!(op.flags & abi::kFlagStrided)) continue;
    strides[i].assign(size_t(op.rank), 1);
    for (const DimRule& r : op.static_stride) strides[i][size_t(r.dim)] = r.value;
    for (const DimRule& r : op.dyn_stride) strides[i][size_t(r.dim)] = r.value;
    for (int64_t& s : strides[i]) {
      if (next < override_values.size()) s = override_values[next++];
    }
    // With an odd first extent, compact strides (null) instead.
    if (op.rank > 0 && (dims[i][0] & 1)) strides[i].clear();
  }
  abi::Slot slots[abi::kMaxSlots], before[abi::kMaxSlots];
  for (abi::Slot& s : slots) s.bits = 0xC0FFEEC0FFEEC0FFull;
  for (size_t i = 0; i < num_ops; ++i) {
    const OperandPlan& op = plan.operands()[i];
    BufferView b;
    b.data = reinterpret_cast<void*>(uintptr_t{1} << 40);
    b.dims = dims[i].data();
    b.rank = op.rank;
    b.strides = strides[i].empty() ? nullptr : strides[i].data();
    std::memcpy(before, slots, sizeof(slots));
    cutecall::Status s = plan.PackOperand(i, b, slots);
    for (size_t k = 0; k < abi::kMaxSlots; ++k) {
      bool own = k >= op.first_slot && k < op.first_slot + OwnSlots(op);
      if (!own) {
        Check(slots[k].bits == before[k].bits, "wrote another's slot");
      }
    }
    if (!s.ok()) {
      Check(!s.message().empty(), "error without a message");
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nul1 = in.find('\0');
  if (nul1 == std::string_view::npos) return 0;
  size_t nul2 = in.find('\0', nul1 + 1);
  if (nul2 == std::string_view::npos) return 0;
  std::string_view names = in.substr(0, nul1);
  std::string_view symbols = in.substr(nul1 + 1, nul2 - nul1 - 1);
  in.remove_prefix(nul2 + 1);
  if (in.size() < 2) return 0;
  size_t n = uint8_t(in[0]) | size_t(uint8_t(in[1])) << 8;
  in.remove_prefix(2);
  std::vector<int64_t> values = TakeValues(&in, n);

  cutecall::ErrorOr<LaunchPlan> plan = LaunchPlan::Parse(
      values.data(), values.size(), "fuzz", names, symbols);
  if (!plan.ok()) {
    Check(!plan.status().message().empty(), "error without a message");
    return 0;
  }
  CheckPlan(plan.value());
  PackAll(plan.value(), in);
  return 0;
}
