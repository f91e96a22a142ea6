// launcher_table.h — the specializations of one torch launch object.
//
// Owns: the table of a TensorLauncher's compiled specializations, each keyed
// by a CallKey (call_key.h: the call's signature words and the values its
// static masks compiled in): per entry, the prepared CallState and how each
// call argument fills its plan (Use). At most
// kMaxEntries; the least recently used is evicted. Modules of evicted or
// cleared entries stay loaded for the life of the process (a CUDA graph may
// still launch them).
// Contract: Find is on the per-call path: no allocation, no Python call
// (but an equality test of compile-time leaves, when an entry has any).
// Register checks a KernelEntry from `on_miss` against the call and its plan
// before adding it, keyed by the static masks the entry carries (the call
// is not described again); nothing in the table changes otherwise.
#ifndef CUTECALL_PYTHON_LAUNCHER_TABLE_H_
#define CUTECALL_PYTHON_LAUNCHER_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <Python.h>

#include "call_key.h"
#include "call_state.h"
#include "kernel_entry.h"
#include "tensor_signature.h"

namespace cutecall::py {

inline constexpr size_t kMaxEntries = 64;  // specializations of one launcher

struct Entry {
  CallKey key;
  std::unique_ptr<CallState> state;
  std::vector<ArgUse> uses;
  // Compile-time leaves: (leaf, value) a call's leaf must equal.
  std::vector<std::pair<size_t, PyObject*>> consts;
  size_t num_operands = 0;
  bool has_outputs = false;
  uint64_t last_used = 0;
};

// One call as the table matches it: its words and tensor views
// (call_key.h) and its leaves.
struct CallSignature : CallWords {
  PyObject* leaves[kMaxArgs];  // borrowed: the arguments hold them
};

class LauncherTable {
 public:
  // The entry whose key `call` matches, or null. The last entry found is
  // tried first; a hit becomes the most recently used.
  Entry* Find(const CallSignature& call) {
    auto match = [&](const Entry* e) {
      if (!e->key.Matches(call)) return false;
      for (const auto& [i, value] : e->consts) {
        PyObject* leaf = call.leaves[i];
        if (leaf == value) continue;
        const int eq = PyObject_RichCompareBool(leaf, value, Py_EQ);
        if (eq != 1) {
          if (eq < 0) PyErr_Clear();
          return false;
        }
      }
      return true;
    };
    Entry* hit = nullptr;
    if (last_ != nullptr && match(last_)) {
      hit = last_;
    } else {
      for (auto& e : entries_) {
        if (match(e.get())) {
          hit = e.get();
          break;
        }
      }
    }
    if (hit != nullptr) {
      hit->last_used = ++clock_;
      last_ = hit;
    }
    return hit;
  }

  // Adds `entry` (what `on_miss` returned) under `call`'s signature and the
  // entry's static masks, after checking its uses against the call and the
  // plan; evicts the least recently used entry when full.
  void Register(const CallSignature& call, const KernelEntry& entry);

  size_t size() const { return entries_.size(); }
  // Drops every entry; their modules stay loaded.
  void Clear();

 private:
  void Evict();

  std::vector<std::unique_ptr<Entry>> entries_;
  Entry* last_ = nullptr;
  uint64_t clock_ = 0;
};

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_LAUNCHER_TABLE_H_
