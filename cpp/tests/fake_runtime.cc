#include "fake_runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

#include "launch_record.h"

namespace cutecall_test {
namespace {

std::atomic<FakeRuntime*> g_current{nullptr};  // the live fake, if any
std::atomic<int> g_orphan_destroys{0};

// Returned when a runtime function is called with no fake alive.
constexpr int kNoFake = 99;

}  // namespace

struct FakeDispatch {
  static int Create(void** module, const unsigned char* bytes, size_t size,
                    const char** shared_libs, size_t num_shared_libs) {
    FakeRuntime* f = g_current;
    if (f == nullptr) return kNoFake;
    std::lock_guard<std::mutex> lock(f->mu_);
    CreateCall call;
    call.bytes.assign(reinterpret_cast<const char*>(bytes), size);
    call.shared_libs = shared_libs;
    call.num_shared_libs = num_shared_libs;
    for (size_t i = 0; shared_libs != nullptr && i < num_shared_libs; ++i) {
      call.shared_lib_paths.emplace_back(shared_libs[i]);
    }
    if (f->create_throws) {
      f->creates.push_back(call);
      throw std::runtime_error("fake create threw");
    }
    int error = num_shared_libs > 0 && f->routed_create_error != 0
                    ? f->routed_create_error
                    : f->create_error;
    if (error == 0) {
      call.module = reinterpret_cast<void*>(f->next_token_);
      f->next_token_ += 0x100;
      *module = call.module;
    }
    f->creates.push_back(call);
    return error;
  }

  static int GetFunction(void** function, void* module, const char* prefix) {
    FakeRuntime* f = g_current;
    if (f == nullptr) return kNoFake;
    std::lock_guard<std::mutex> lock(f->mu_);
    GetFunctionCall call{module, prefix ? prefix : "", nullptr};
    if (f->get_function_throws) {
      f->get_functions.push_back(call);
      throw std::runtime_error("fake get_function threw");
    }
    if (f->get_function_error == 0) {
      call.function = static_cast<char*>(module) + 0x10;
      *function = call.function;
    }
    f->get_functions.push_back(call);
    return f->get_function_error;
  }

  static int Run(void* function, void** args, size_t num_args) {
    FakeRuntime* f = g_current;
    if (f == nullptr) return kNoFake;
    std::unique_lock<std::mutex> lock(f->mu_);
    RunCall call;
    call.function = function;
    call.args.assign(args, args + num_args);
    if (num_args >= 2) {
      std::memcpy(&call.stream, args[0], sizeof(void*));
      for (size_t i = 1; i + 1 < num_args; ++i) {
        cutecall::abi::Slot slot;
        std::memcpy(&slot, args[i], sizeof(slot));
        call.slots.push_back(slot);
      }
      call.status = static_cast<int32_t*>(args[num_args - 1]);
      call.status_on_entry = *call.status;
    }
    f->runs.push_back(call);
    if (f->run_throws) throw std::runtime_error("fake run threw");
    if (f->run_throws_non_std) throw 42;
    if (f->run_cuda_status != 0 && call.status != nullptr) {
      *call.status = f->run_cuda_status;
    }
    // A module loaded with shared libraries had its launch import renamed:
    // it launches through the shim; any other through the runtime's own.
    bool routed = false;
    for (const CreateCall& c : f->creates) {
      if (c.module != nullptr && static_cast<char*>(c.module) + 0x10 == function) {
        routed = c.num_shared_libs > 0;
      }
    }
    const std::vector<cutecall::CudaLaunchConfig> launches = f->run_launches;
    const int run_error = f->run_error;
    lock.unlock();  // LaunchKernelEx locks
    for (const cutecall::CudaLaunchConfig& config : launches) {
      int rc = routed ? cutecall_launch_kex(&config, function, args)
                      : LaunchKernelEx(&config, function, args);
      if (rc != 0) {
        if (call.status != nullptr) *call.status = rc;
        break;
      }
    }
    return run_error;
  }

  static int LaunchKernelEx(const cutecall::CudaLaunchConfig* config,
                            const void* kernel, void** args) {
    FakeRuntime* f = g_current;
    if (f == nullptr) return kNoFake;
    std::lock_guard<std::mutex> lock(f->mu_);
    LaunchCall call;
    call.config = config;
    if (config != nullptr) call.values = *config;
    call.kernel = kernel;
    call.args = args;
    f->launches.push_back(call);
    return f->launch_error;
  }

  static int Destroy(void* module) {
    FakeRuntime* f = g_current;
    if (f == nullptr) {
      ++g_orphan_destroys;
      return 0;
    }
    std::lock_guard<std::mutex> lock(f->mu_);
    f->destroyed.push_back(module);
    return 0;
  }

  static const char* ErrorName(int error) {
    switch (error) {
      case kFakeErrorInvalidModule: return "CuteDSLRT_Error_InvalidModule";
      case kFakeErrorFunctionMissing: return "CuteDSLRT_Error_FunctionNotFound";
      case kFakeErrorLaunch: return "CuteDSLRT_Error_LaunchFailed";
      default: return nullptr;
    }
  }

  static const char* ErrorString(int error) {
    switch (error) {
      case kFakeErrorInvalidModule: return "the module bytes are invalid";
      case kFakeErrorFunctionMissing: return "no such function";
      case kFakeErrorLaunch: return "the launch failed";
      default: return nullptr;
    }
  }
};

namespace {

const cutecall::RuntimeTable kFakeTable = [] {
  cutecall::RuntimeTable t;
  t.module_create_from_bytes = &FakeDispatch::Create;
  t.module_get_function = &FakeDispatch::GetFunction;
  t.function_run = &FakeDispatch::Run;
  t.module_destroy = &FakeDispatch::Destroy;
  t.get_error_name = &FakeDispatch::ErrorName;
  t.get_error_string = &FakeDispatch::ErrorString;
  return t;
}();

const cutecall::RuntimeTable kFakeTableWithLaunch = [] {
  cutecall::RuntimeTable t = kFakeTable;
  t.launch_kernel_ex = &FakeDispatch::LaunchKernelEx;
  return t;
}();

}  // namespace

FakeRuntime::FakeRuntime(bool exports_launch_kernel_ex)
    : table_(exports_launch_kernel_ex ? &kFakeTableWithLaunch : &kFakeTable),
      override_(table_) {
  if (g_current != nullptr) ADD_FAILURE() << "two FakeRuntimes alive at once";
  g_current = this;
}

FakeRuntime::~FakeRuntime() {
  if (live_module_count() != 0) {
    ADD_FAILURE() << live_module_count()
                  << " module(s) still loaded when the FakeRuntime died";
  }
  g_current = nullptr;
}

int FakeRuntime::OrphanDestroys() { return g_orphan_destroys.load(); }

}  // namespace cutecall_test
