// module_registry.h — compiled modules, loaded once per process.
//
// Owns: every CuTe DSL runtime module this process has loaded, keyed by the
// SHA-256 of the object bytes and the function prefix. A module is loaded on
// the first Acquire, shared by every call site that names the same bytes,
// and destroyed with its last user. Thread-safe.
// Contract: bytes are verified against their digest, and the function's
// symbols are looked up in the ELF symbol table, *before* the runtime sees
// them (the runtime aborts the process on an unknown prefix). Runtime calls
// are guarded so that no C++ exception escapes into a caller.
// Where it can, a module is loaded with its launch call routed through
// cutecall_launch_kex (launch_record.h), so that launch errors name
// the grid and block; where it cannot, or where the routed load fails, the
// bytes are loaded exactly as compiled.
#ifndef CUTECALL_SRC_MODULE_REGISTRY_H_
#define CUTECALL_SRC_MODULE_REGISTRY_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "cutecall/abi.h"
#include "elf.h"
#include "cutecall/runtime_table.h"
#include "sha256.h"
#include "cutecall/status.h"

namespace cutecall {

class LoadedModule {
 public:
  // `launch_unrouted`: why this module's launches are not recorded, or ""
  // when they pass through cutecall_launch_kex.
  LoadedModule(const RuntimeTable* rt, void* module, void* function,
               Digest key, std::string prefix, std::string kernel_name,
               std::string launch_unrouted = "");
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  // Runs the function: packed = {&stream, &slots[0..n), &status}. Errors name
  // `kernel` (the calling site's name: one module may serve several names)
  // and carry the runtime or CUDA status; CUDA errors also the launch's grid
  // and block, where recorded.
  Status Run(void* stream, abi::Slot* slots, size_t num_slots,
             const std::string& kernel) const;

  const Digest& key() const { return key_; }
  const std::string& kernel_name() const { return kernel_name_; }
  // Why launches are not recorded; "" when they are.
  const std::string& launch_unrouted() const { return launch_unrouted_; }

 private:
  // The grid and block of this thread's last run, or why they are unknown.
  std::string DescribeLastLaunch() const;

  const RuntimeTable* rt_;
  void* module_;
  void* function_;
  Digest key_;
  std::string prefix_;
  std::string kernel_name_;
  std::string launch_unrouted_;
};

class ModuleRegistry {
 public:
  static ModuleRegistry& Global();

  ErrorOr<std::shared_ptr<LoadedModule>> Acquire(const Digest& key,
                                                 std::string_view bytes,
                                                 const std::string& prefix,
                                                 const std::string& kernel_name);

  // The module already loaded from bytes with SHA-256 `key` (verified
  // when it was loaded) for `prefix`, or nullptr: a caller holding only the
  // digest skips reading and hashing the bytes again.
  std::shared_ptr<LoadedModule> FindLive(const Digest& key,
                                         const std::string& prefix);

  size_t live_modules() const;
  size_t total_loads() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<Digest, std::string>, std::weak_ptr<LoadedModule>>
      modules_;
  size_t total_loads_ = 0;
};

}  // namespace cutecall

#endif  // CUTECALL_SRC_MODULE_REGISTRY_H_
