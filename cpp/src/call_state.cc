#include "cutecall/call_state.h"

namespace cutecall {

ErrorOr<std::unique_ptr<CallState>> CallState::Instantiate(
    const CallAttributes& a) {
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
      LaunchPlan::Parse(a.plan, a.plan_size, kernel, a.operand_names);
  if (!plan.ok()) return plan.status();
  return std::unique_ptr<CallState>(
      new CallState(std::move(plan).value(), key, std::string(a.module),
                    std::string(a.function)));
}

Status CallState::Prepare() {
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

}  // namespace cutecall
