// An in-process stand-in for the CuTe DSL runtime.
//
// A FakeRuntime installs itself (with cutecall::ScopedRuntimeOverride) for
// its lifetime. Its RuntimeTable holds static functions that dispatch to the
// live fake, record every call and fail on demand. At most one FakeRuntime
// may be alive at a time. Module and function handles are opaque tokens that
// are never dereferenced, so a module destroyed after its fake has gone is
// harmless (it is counted in OrphanDestroys()).
//
// Records are written under a mutex; read them only while no runtime call is
// in flight (e.g. after joining the threads that made them).
//
// Built with exports_launch_kernel_ex, its table also has launch_kernel_ex
// (the runtime's _cudaLaunchKernelEx), so the module registry can route
// module launches through cutecall_launch_kex. function_run plays the
// compiled launcher: it launches each run_launches entry (see there).
#ifndef CUTECALL_TESTS_FAKE_RUNTIME_H_
#define CUTECALL_TESTS_FAKE_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cutecall/abi.h"
#include "cutecall/runtime_table.h"

namespace cutecall_test {

// Error names the fake reports through get_error_name / get_error_string.
// Codes without an entry have neither a name nor a description.
inline constexpr int kFakeErrorInvalidModule = 1;    // CuteDSLRT_Error_InvalidModule
inline constexpr int kFakeErrorFunctionMissing = 2;  // CuteDSLRT_Error_FunctionNotFound
inline constexpr int kFakeErrorLaunch = 3;           // CuteDSLRT_Error_LaunchFailed

struct CreateCall {
  std::string bytes;
  const char** shared_libs = nullptr;  // as passed: do not dereference later
  size_t num_shared_libs = 0;
  std::vector<std::string> shared_lib_paths;  // copies of *shared_libs
  void* module = nullptr;  // the handle returned (nullptr on failure)
};

struct GetFunctionCall {
  void* module = nullptr;
  std::string prefix;
  void* function = nullptr;  // the handle returned (nullptr on failure)
};

// One Function_Run call, decoded per abi.h.
struct RunCall {
  void* function = nullptr;
  std::vector<void*> args;  // the packed array itself, num_args entries
  void* stream = nullptr;   // *args[0]
  std::vector<cutecall::abi::Slot> slots;  // *args[1 .. num_args - 2]
  int32_t* status = nullptr;               // args[num_args - 1]
  int32_t status_on_entry = -1;            // *status when the call began
};

// One launch_kernel_ex call.
struct LaunchCall {
  const cutecall::CudaLaunchConfig* config = nullptr;  // as passed
  cutecall::CudaLaunchConfig values{};                 // *config, if not null
  const void* kernel = nullptr;
  void** args = nullptr;
};

class FakeRuntime {
 public:
  explicit FakeRuntime(bool exports_launch_kernel_ex = false);
  ~FakeRuntime();
  FakeRuntime(const FakeRuntime&) = delete;
  FakeRuntime& operator=(const FakeRuntime&) = delete;

  // The table installed while this fake is alive.
  const cutecall::RuntimeTable* table() const { return table_; }
  // module_destroy calls that arrived while no fake was alive.
  static int OrphanDestroys();

  // Programmable failures.
  int create_error = 0;             // module_create_from_bytes returns it
  int routed_create_error = 0;      // ... returns it when given shared libs
  bool create_throws = false;       // module_create_from_bytes throws
  int get_function_error = 0;       // module_get_function returns it
  bool get_function_throws = false; // module_get_function throws
  int run_error = 0;                // function_run returns it
  int32_t run_cuda_status = 0;      // function_run writes it to the status slot
  bool run_throws = false;          // function_run throws std::runtime_error
  bool run_throws_non_std = false;  // function_run throws an int
  // function_run launches each, in order, stopping at the first that fails
  // and writing its result to the status slot (as a compiled launcher
  // does): through cutecall_launch_kex(&config, function, args) when the
  // module was loaded with shared libraries (routed), else straight to
  // launch_kernel_ex (the runtime's own, unrecorded).
  std::vector<cutecall::CudaLaunchConfig> run_launches;
  int launch_error = 0;             // launch_kernel_ex returns it

  // Records.
  std::vector<CreateCall> creates;
  std::vector<GetFunctionCall> get_functions;
  std::vector<RunCall> runs;
  std::vector<LaunchCall> launches;  // launch_kernel_ex calls
  std::vector<void*> destroyed;  // module handles, in order

  int destroy_count() const { return int(destroyed.size()); }
  // Modules created and not yet destroyed.
  int live_module_count() const {
    int created = 0;
    for (const CreateCall& c : creates) created += c.module != nullptr;
    return created - destroy_count();
  }

 private:
  friend struct FakeDispatch;
  std::mutex mu_;
  uintptr_t next_token_ = 0x10000;
  const cutecall::RuntimeTable* table_;
  cutecall::ScopedRuntimeOverride override_;
};

}  // namespace cutecall_test

#endif  // CUTECALL_TESTS_FAKE_RUNTIME_H_
