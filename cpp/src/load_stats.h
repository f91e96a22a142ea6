// Internal: where this process's bundle loading time goes (the recording
// side of cutecall::BundleLoadStats, cutecall/bundle.h).
//
// Owns: one process-wide tally, written by the runtime table (dlopen), the
// module registry (module creation) and bundles (manifests, runtime choice,
// object checks). Contract: recording takes a mutex and is only on load
// paths, never on a launch; a Stopwatch is a steady_clock reading.
#ifndef CUTECALL_SRC_LOAD_STATS_H_
#define CUTECALL_SRC_LOAD_STATS_H_

#include <chrono>

namespace cutecall::load_stats {

enum class Event {
  kManifest,       // one Open's manifest: read, digest, fields, plans, files
  kRuntimeChoose,  // choosing the DSL runtime (identities, candidates)
  kRuntimeDlopen,  // dlopen + symbol resolution of the DSL runtime
  kObjectVerify,   // one object read, its size, SHA-256 and ELF symbols
  kModuleCreate,   // one CuteDSLRT_Module_Create_From_Bytes + Get_Function
  kModuleShared,   // a load served by a module already live (no create)
};

// Adds `ms` to `event`'s time and one to its count.
void Record(Event event, double ms);

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Ms() const {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace cutecall::load_stats

#endif  // CUTECALL_SRC_LOAD_STATS_H_
