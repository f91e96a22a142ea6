// cutecall/call_state.h — one call site's state across the three stages.
//
// Owns: the validated launch plan and the module bytes of one custom call
// (instantiate), the loaded module (prepare), and the per-call packing and
// launch (execute). Independent of XLA so tests can drive every stage;
// xla_ffi.cc only decodes XLA's arguments and forwards here.
// Contract: Instantiate touches no runtime; Prepare loads at most once and
// is safe to call concurrently; Execute allocates nothing, never syncs, and
// fails with FailedPrecondition if Prepare has not succeeded.
#ifndef CUTECALL_CALL_STATE_H_
#define CUTECALL_CALL_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cutecall/launch_plan.h"
#include "cutecall/module_registry.h"

namespace cutecall {

struct CallAttributes {
  std::string_view module;    // object bytes
  std::string_view key;       // 64 hex characters: SHA-256 of `module`
  std::string_view function;  // function prefix inside the object
  std::string_view kernel;    // user-facing kernel name, for errors
  const int64_t* plan = nullptr;
  size_t plan_size = 0;
  std::string_view operand_names;  // comma-separated, may be empty
};

class CallState {
 public:
  static ErrorOr<std::unique_ptr<CallState>> Instantiate(
      const CallAttributes& attrs);
  virtual ~CallState() = default;

  Status Prepare();
  bool prepared() const { return module_.load() != nullptr; }
  const LaunchPlan& plan() const { return plan_; }

  // `arg(i)` / `ret(i)` return ErrorOr<BufferView> for XLA operand i.
  template <typename ArgFn, typename RetFn>
  Status Execute(void* stream, size_t num_args, size_t num_rets, ArgFn&& arg,
                 RetFn&& ret) const {
    const LoadedModule* module = module_.load(std::memory_order_acquire);
    if (module == nullptr) {
      return FailedPrecondition("cutecall: kernel '" + plan_.kernel_name() +
                                "': execute before prepare");
    }
    if (num_args != plan_.num_args() || num_rets != plan_.num_rets()) {
      return InvalidArgument(
          "cutecall: kernel '" + plan_.kernel_name() + "': called with " +
          std::to_string(num_args) + " operands and " +
          std::to_string(num_rets) + " results, compiled for " +
          std::to_string(plan_.num_args()) + " and " +
          std::to_string(plan_.num_rets()));
    }
    abi::Slot slots[abi::kMaxSlots];
    const auto& ops = plan_.operands();
    for (size_t i = 0; i < ops.size(); ++i) {
      ErrorOr<BufferView> b = ops[i].source == abi::Source::kArg
                                  ? arg(size_t(ops[i].index))
                                  : ret(size_t(ops[i].index));
      if (!b.ok()) return b.status();
      if (Status s = plan_.PackOperand(i, b.value(), slots); !s.ok()) return s;
    }
    return module->Run(stream, slots, plan_.num_slots(), plan_.kernel_name());
  }

 private:
  CallState(LaunchPlan plan, Digest key, std::string bytes,
            std::string function)
      : plan_(std::move(plan)),
        key_(key),
        bytes_(std::move(bytes)),
        function_(std::move(function)) {}

  LaunchPlan plan_;
  Digest key_;
  std::string bytes_;
  std::string function_;
  std::mutex prepare_mu_;
  std::shared_ptr<LoadedModule> owner_;
  std::atomic<const LoadedModule*> module_{nullptr};
};

}  // namespace cutecall

#endif  // CUTECALL_CALL_STATE_H_
