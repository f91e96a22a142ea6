#include "call_state.h"

#include <cstring>

namespace cutecall {

CallStats ReadCallStats() {
  const internal::CallCounters& c = internal::call_counters;
  CallStats s;
  s.instantiates = c.instantiates.load(std::memory_order_relaxed);
  s.prepares = c.prepares.load(std::memory_order_relaxed);
  s.executes = c.executes.load(std::memory_order_relaxed);
  return s;
}

void ResetCallStats() {
  internal::CallCounters& c = internal::call_counters;
  c.instantiates.store(0, std::memory_order_relaxed);
  c.prepares.store(0, std::memory_order_relaxed);
  c.executes.store(0, std::memory_order_relaxed);
}

ErrorOr<std::unique_ptr<CallState>> CallState::Instantiate(
    const CallAttributes& a) {
  return Instantiate(a, nullptr);
}

ErrorOr<std::unique_ptr<CallState>> CallState::Instantiate(
    const CallAttributes& a, const LaunchPlan* parsed) {
  internal::call_counters.instantiates.fetch_add(1, std::memory_order_relaxed);
  std::string kernel = a.kernel.empty() ? std::string("<unnamed>")
                                        : std::string(a.kernel);
  const std::string who = "cutecall: kernel '" + kernel + "': ";
  if (a.module.empty()) {
    return InvalidArgument(who + "attribute 'module' is empty");
  }
  Digest key;
  if (!FromHex(a.key, &key)) {
    std::string shown(a.key.substr(0, 80));
    return InvalidArgument(who + "attribute 'key' must be 64 hex characters, "
                                 "got '" + shown + "' (" +
                           std::to_string(a.key.size()) + " characters)");
  }
  if (Sha256(a.module) != key) {
    return InvalidArgument(who + "attribute 'key' " + std::string(a.key) +
                           " does not match the SHA-256 of 'module' " +
                           ToHex(Sha256(a.module)));
  }
  if (a.function.empty()) {
    return InvalidArgument(who + "attribute 'function' is empty");
  }
  ErrorOr<LaunchPlan> plan =
      parsed != nullptr ? ErrorOr<LaunchPlan>(*parsed)
                        : LaunchPlan::Parse(a.plan, a.plan_size, kernel,
                                            a.operand_names, a.symbol_names);
  if (!plan.ok()) return plan.status();
  if (a.num_scalars != plan->num_scalars()) {
    return InvalidArgument(who + "attribute 'scalars' has " +
                           std::to_string(a.num_scalars) +
                           " values but the plan has " +
                           std::to_string(plan->num_scalars()) +
                           " runtime scalars");
  }
  if (a.scalars == nullptr && a.num_scalars != 0) {
    return InvalidArgument(who + "attribute 'scalars' is null");
  }
  std::vector<abi::Slot> scalars(a.num_scalars);
  static_assert(sizeof(abi::Slot) == sizeof(int64_t));
  if (a.num_scalars != 0) {
    std::memcpy(scalars.data(), a.scalars, a.num_scalars * sizeof(int64_t));
  }
  return std::unique_ptr<CallState>(new CallState(
      std::move(plan).value(), std::move(scalars), key, std::string(a.module),
      std::string(a.function)));
}

Status CallState::Prepare() {
  internal::call_counters.prepares.fetch_add(1, std::memory_order_relaxed);
  if (prepared()) return Status::Ok();
  std::lock_guard<std::mutex> lock(prepare_mu_);
  if (prepared()) return Status::Ok();
  ErrorOr<std::shared_ptr<LoadedModule>> m = ModuleRegistry::Global().Acquire(
      key_, bytes_, function_, plan_.kernel_name());
  if (!m.ok()) return m.status();
  owner_ = std::move(m).value();
  module_.store(owner_.get(), std::memory_order_release);
  return Status::Ok();
}

Status CallState::Launch(void* stream, const BufferView* operands,
                         size_t num_operands, const abi::Slot* scalars) const {
  internal::call_counters.executes.fetch_add(1, std::memory_order_relaxed);
  const LoadedModule* module = module_.load(std::memory_order_acquire);
  if (module == nullptr) {
    return FailedPrecondition("cutecall: kernel '" + plan_.kernel_name() +
                              "': launch before prepare");
  }
  const auto& ops = plan_.operands();
  if (num_operands != ops.size()) {
    return InvalidArgument("cutecall: kernel '" + plan_.kernel_name() +
                           "': called with " + std::to_string(num_operands) +
                           " tensors, compiled for " +
                           std::to_string(ops.size()));
  }
  abi::Slot slots[abi::kMaxSlots];
  for (size_t i = 0; i < ops.size(); ++i) {
    if (Status s = plan_.PackOperand(i, operands[i], slots); !s.ok()) return s;
  }
  const abi::Slot* values = scalars != nullptr ? scalars : scalars_.data();
  std::copy(values, values + plan_.num_scalars(),
            slots + plan_.first_scalar_slot());
  return module->Run(stream, slots, plan_.num_slots(), plan_.kernel_name());
}

}  // namespace cutecall
