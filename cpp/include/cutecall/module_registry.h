// cutecall/module_registry.h — compiled modules, loaded once per process.
//
// Owns: every CuTe DSL runtime module this process has loaded, keyed by the
// SHA-256 of the object bytes and the function prefix. A module is loaded on
// the first Acquire, shared by every call site that names the same bytes,
// and destroyed with its last user. Thread-safe.
// Contract: bytes are verified against their digest, and the function's
// symbols are looked up in the ELF symbol table, *before* the runtime sees
// them (the runtime aborts the process on an unknown prefix). Runtime calls
// are guarded so that no C++ exception escapes into a caller.
#ifndef CUTECALL_MODULE_REGISTRY_H_
#define CUTECALL_MODULE_REGISTRY_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "cutecall/abi.h"
#include "cutecall/elf.h"
#include "cutecall/runtime_table.h"
#include "cutecall/sha256.h"
#include "cutecall/status.h"

namespace cutecall {

class LoadedModule {
 public:
  LoadedModule(const RuntimeTable* rt, void* module, void* function,
               Digest key, std::string prefix, std::string kernel_name);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  // Runs the function: packed = {&stream, &slots[0..n), &status}. Errors name
  // `kernel` (the calling site's name: one module may serve several names)
  // and carry the runtime or CUDA status.
  Status Run(void* stream, abi::Slot* slots, size_t num_slots,
             const std::string& kernel) const;

  const Digest& key() const { return key_; }
  const std::string& kernel_name() const { return kernel_name_; }

 private:
  const RuntimeTable* rt_;
  void* module_;
  void* function_;
  Digest key_;
  std::string prefix_;
  std::string kernel_name_;
};

class ModuleRegistry {
 public:
  static ModuleRegistry& Global();

  ErrorOr<std::shared_ptr<LoadedModule>> Acquire(const Digest& key,
                                                 std::string_view bytes,
                                                 const std::string& prefix,
                                                 const std::string& kernel_name);

  size_t live_modules() const;
  size_t total_loads() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<Digest, std::string>, std::weak_ptr<LoadedModule>>
      modules_;
  size_t total_loads_ = 0;
};

}  // namespace cutecall

#endif  // CUTECALL_MODULE_REGISTRY_H_
