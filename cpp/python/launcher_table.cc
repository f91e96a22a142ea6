// launcher_table.cc — registering, evicting and clearing a launch object's
// specializations (launcher_table.h).
#include "launcher_table.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "raise.h"

namespace nb = nanobind;

namespace cutecall::py {
namespace {

// Modules of evicted entries: kept loaded until exit.
std::vector<std::shared_ptr<LoadedModule>>& PinnedModules() {
  static auto* pinned = new std::vector<std::shared_ptr<LoadedModule>>();
  return *pinned;
}

}  // namespace

void LauncherTable::Register(const CallSignature& call,
                             const nb::tuple& spec) {
  if (spec.size() != 8) throw nb::value_error("on_miss: expected 8 fields");
  nb::bytes module = nb::cast<nb::bytes>(spec[0]);
  std::string key = nb::cast<std::string>(spec[1]);
  std::string function = nb::cast<std::string>(spec[2]);
  std::string kernel = nb::cast<std::string>(spec[3]);
  std::vector<int64_t> plan = nb::cast<std::vector<int64_t>>(spec[4]);
  std::string names = nb::cast<std::string>(spec[5]);
  std::string symbols = nb::cast<std::string>(spec[6]);
  std::vector<int32_t> flat = nb::cast<std::vector<int32_t>>(spec[7]);

  std::vector<int64_t> zeros(plan.size() > 4 ? size_t(std::max<int64_t>(plan[4], 0)) : 0);
  CallAttributes a;
  a.module = std::string_view(static_cast<const char*>(module.data()), module.size());
  a.key = key;
  a.function = function;
  a.kernel = kernel;
  a.plan = plan.data();
  a.plan_size = plan.size();
  a.operand_names = names;
  a.symbol_names = symbols;
  a.scalars = zeros.data();
  a.num_scalars = zeros.size();
  ErrorOr<std::unique_ptr<CallState>> state = CallState::Instantiate(a);
  if (!state.ok()) Raise(state.status());
  auto entry = std::make_unique<Entry>();
  entry->state = std::move(state).value();
  const LaunchPlan& p = entry->state->plan();
  entry->num_operands = p.operands().size();
  if (flat.size() != 3 * call.n) {
    throw nb::value_error(("cutecall: kernel '" + kernel + "': uses has " +
                           std::to_string(flat.size()) + " entries for " +
                           std::to_string(call.n) + " arguments").c_str());
  }
  std::vector<int> tensor_seen(entry->num_operands, 0);
  std::vector<int> scalar_seen(p.num_scalars(), 0);
  for (size_t i = 0; i < call.n; ++i) {
    Use u{flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]};
    const bool is_tensor = call.tag(i) == kTagTensor;
    const bool tensor_use = u.kind == kUseTensor || u.kind == kUseOutput;
    entry->has_outputs |= u.kind == kUseOutput;
    bool ok = u.kind == kUseIgnore ||
              (tensor_use && is_tensor && u.index >= 0 &&
               size_t(u.index) < tensor_seen.size() && !tensor_seen[size_t(u.index)]++) ||
              (u.kind == kUseScalar && !is_tensor && u.index >= 0 &&
               size_t(u.index) < scalar_seen.size() && u.type >= 0 &&
               u.type < kNumScalarTypes && !scalar_seen[size_t(u.index)]++);
    if (!ok) {
      throw nb::value_error(("cutecall: kernel '" + kernel +
                             "': bad use for argument " + std::to_string(i))
                                .c_str());
    }
    entry->uses.push_back(u);
  }
  for (int s : tensor_seen) {
    if (!s) throw nb::value_error("cutecall: a plan operand has no argument");
  }
  for (int s : scalar_seen) {
    if (!s) throw nb::value_error("cutecall: a plan scalar has no argument");
  }
  if (Status s = entry->state->Prepare(); !s.ok()) Raise(s);
  entry->signature.assign(call.signature, call.signature + call.sig_len);
  entry->last_used = ++clock_;
  if (entries_.size() >= kMaxEntries) Evict();
  entries_.push_back(std::move(entry));
}

void LauncherTable::Evict() {
  size_t oldest = 0;
  for (size_t i = 1; i < entries_.size(); ++i) {
    if (entries_[i]->last_used < entries_[oldest]->last_used) oldest = i;
  }
  if (last_ == entries_[oldest].get()) last_ = nullptr;
  PinnedModules().push_back(entries_[oldest]->state->module_owner());
  entries_.erase(entries_.begin() + std::ptrdiff_t(oldest));
}

void LauncherTable::Clear() {
  for (auto& e : entries_) PinnedModules().push_back(e->state->module_owner());
  entries_.clear();
  last_ = nullptr;
}

}  // namespace cutecall::py
