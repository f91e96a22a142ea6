// launcher_table.cc — registering, evicting and clearing a launch object's
// specializations (launcher_table.h).
#include "launcher_table.h"

#include <nanobind/nanobind.h>

#include <string>

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
                             const KernelEntry& spec) {
  const std::string& kernel = spec.kernel();
  const std::vector<StaticMask>& masks = spec.static_masks();
  ErrorOr<CallKey> key = CallKey::Make(call, masks.data(), masks.size());
  if (!key.ok()) Raise(key.status());
  // The plan the entry parsed when it was built: not parsed again.
  ErrorOr<std::unique_ptr<CallState>> state =
      CallState::Instantiate(spec.Attributes(), &spec.parsed_plan());
  if (!state.ok()) Raise(state.status());
  auto entry = std::make_unique<Entry>();
  entry->key = std::move(key).value();
  entry->state = std::move(state).value();
  const LaunchPlan& p = entry->state->plan();
  entry->num_operands = p.operands().size();
  const std::vector<ArgUse>& uses = spec.uses();
  if (uses.size() != call.n) {
    throw nb::value_error(("cutecall: kernel '" + kernel + "': uses has " +
                           std::to_string(uses.size()) + " entries for " +
                           std::to_string(call.n) + " arguments").c_str());
  }
  std::vector<int> tensor_seen(entry->num_operands, 0);
  std::vector<int> scalar_seen(p.num_scalars(), 0);
  for (size_t i = 0; i < call.n; ++i) {
    const ArgUse& u = uses[i];
    const size_t at = size_t(u.index);
    const bool is_tensor = call.tag(i) == kTagTensor;
    const bool tensor_use = u.kind == UseKind::kTensor || u.kind == UseKind::kOutput;
    entry->has_outputs |= u.kind == UseKind::kOutput;
    if (u.kind == UseKind::kConst) entry->consts.emplace_back(i, u.value.ptr());
    bool ok = u.kind == UseKind::kIgnore || u.kind == UseKind::kConst ||
              (tensor_use && is_tensor && u.index >= 0 &&
               at < tensor_seen.size() && !tensor_seen[at]++) ||
              (u.kind == UseKind::kScalar && !is_tensor && u.index >= 0 &&
               at < scalar_seen.size() && !scalar_seen[at]++);
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
