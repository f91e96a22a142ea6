// call_state.h — one call site's state across the three stages.
//
// Owns: the validated launch plan, the module bytes and the runtime scalar
// values of one custom call (instantiate), the loaded module (prepare), and
// the per-call packing and launch (execute, or Launch for front ends that
// hold their operands themselves: torch, C++ programs); and the
// process-wide stage counters. Independent of XLA so tests can drive every stage; xla_ffi.cc
// only decodes XLA's arguments and forwards here.
// Contract: Instantiate touches no runtime; Prepare loads at most once and
// is safe to call concurrently; Execute allocates nothing, never syncs, and
// fails with FailedPrecondition if Prepare has not succeeded. Each stage call
// bumps its counter (relaxed), whether or not it succeeds.
#ifndef CUTECALL_SRC_CALL_STATE_H_
#define CUTECALL_SRC_CALL_STATE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cutecall/launch_plan.h"
#include "module_registry.h"

namespace cutecall {

// How often each stage has been entered in this process, by every call site.
struct CallStats {
  uint64_t instantiates = 0;
  uint64_t prepares = 0;
  uint64_t executes = 0;
};
CallStats ReadCallStats();
void ResetCallStats();

namespace internal {
struct CallCounters {
  std::atomic<uint64_t> instantiates{0};
  std::atomic<uint64_t> prepares{0};
  std::atomic<uint64_t> executes{0};
};
// Constant-initialized; only ever touched with relaxed atomic operations.
inline CallCounters call_counters;
}  // namespace internal

struct CallAttributes {
  std::string_view module;    // object bytes
  std::string_view key;       // 64 hex characters: SHA-256 of `module`
  std::string_view function;  // function prefix inside the object
  std::string_view kernel;    // user-facing kernel name, for errors
  const int64_t* plan = nullptr;
  size_t plan_size = 0;
  std::string_view operand_names;  // comma-separated, may be empty
  std::string_view symbol_names;   // comma-separated, may be empty
  // Runtime scalar values, one per plan scalar; each value's 8 bytes are
  // copied verbatim into its slot.
  const int64_t* scalars = nullptr;
  size_t num_scalars = 0;
};

class CallState {
 public:
  static ErrorOr<std::unique_ptr<CallState>> Instantiate(
      const CallAttributes& attrs);
  // The same, with `attrs.plan` already parsed into `parsed` (null: parsed
  // here), e.g. by the KernelEntry a launch object registers.
  static ErrorOr<std::unique_ptr<CallState>> Instantiate(
      const CallAttributes& attrs, const LaunchPlan* parsed);
  virtual ~CallState() = default;

  Status Prepare();
  bool prepared() const { return module_.load() != nullptr; }
  const LaunchPlan& plan() const { return plan_; }

  // `arg(i)` / `ret(i)` return ErrorOr<BufferView> for XLA operand i.
  template <typename ArgFn, typename RetFn>
  Status Execute(void* stream, size_t num_args, size_t num_rets, ArgFn&& arg,
                 RetFn&& ret) const {
    internal::call_counters.executes.fetch_add(1, std::memory_order_relaxed);
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
    // A call whose results are all empty has nothing to write: no launch
    // (a kernel would size its grid from them, and a grid of 0 blocks is a
    // CUDA launch error).
    bool all_empty = num_rets > 0;
    for (size_t r = 0; r < num_rets && all_empty; ++r) {
      ErrorOr<BufferView> b = ret(r);
      if (!b.ok()) return b.status();
      all_empty = IsEmpty(b.value());
    }
    if (all_empty) return Status::Ok();
    abi::Slot slots[abi::kMaxSlots];
    const auto& ops = plan_.operands();
    for (size_t i = 0; i < ops.size(); ++i) {
      ErrorOr<BufferView> b = ops[i].source == abi::Source::kArg
                                  ? arg(size_t(ops[i].index))
                                  : ret(size_t(ops[i].index));
      if (!b.ok()) return b.status();
      if (Status s = plan_.PackOperand(i, b.value(), slots); !s.ok()) return s;
    }
    std::copy(scalars_.begin(), scalars_.end(),
              slots + plan_.first_scalar_slot());
    return module->Run(stream, slots, plan_.num_slots(), plan_.kernel_name());
  }

  // Packs `operands` (one per plan operand, in plan order) and the scalar
  // slots (`scalars`: one Slot per plan scalar; nullptr uses the values
  // given at Instantiate), then runs on `stream`. Counted as an execute.
  Status Launch(void* stream, const BufferView* operands, size_t num_operands,
                const abi::Slot* scalars) const;

  // The loaded module (null before Prepare). Holding it keeps the module
  // loaded, e.g. while a CUDA graph that launches it may replay.
  std::shared_ptr<LoadedModule> module_owner() const { return owner_; }

 private:
  CallState(LaunchPlan plan, std::vector<abi::Slot> scalars, Digest key,
            std::string bytes, std::string function)
      : plan_(std::move(plan)),
        scalars_(std::move(scalars)),
        key_(key),
        bytes_(std::move(bytes)),
        function_(std::move(function)) {}

  LaunchPlan plan_;
  std::vector<abi::Slot> scalars_;  // the scalar slots, fixed per call site
  Digest key_;
  std::string bytes_;
  std::string function_;
  std::mutex prepare_mu_;
  std::shared_ptr<LoadedModule> owner_;
  std::atomic<const LoadedModule*> module_{nullptr};
};

}  // namespace cutecall

#endif  // CUTECALL_SRC_CALL_STATE_H_
