// load_stats.cc — the process-wide tally behind GetBundleLoadStats()
// (cutecall/bundle.h; recording side: load_stats.h).
#include "load_stats.h"

#include <mutex>

#include "cutecall/bundle.h"

namespace cutecall {
namespace {

// Per-create times kept for GetBundleLoadStats (the first ones: a process
// that creates more keeps counting, but stops listing).
constexpr size_t kMaxListedCreates = 256;

struct Tally {
  std::mutex mu;
  BundleLoadStats stats;
};

Tally& GetTally() {
  static Tally* tally = new Tally();  // lives to exit
  return *tally;
}

}  // namespace

namespace load_stats {

void Record(Event event, double ms) {
  Tally& t = GetTally();
  std::lock_guard<std::mutex> lock(t.mu);
  BundleLoadStats& s = t.stats;
  switch (event) {
    case Event::kManifest:
      s.opens += 1;
      s.manifest_ms += ms;
      break;
    case Event::kRuntimeChoose:
      s.runtime_choose_ms += ms;
      break;
    case Event::kRuntimeDlopen:
      s.runtime_dlopens += 1;
      s.runtime_dlopen_ms += ms;
      break;
    case Event::kObjectVerify:
      s.objects_verified += 1;
      s.object_verify_ms += ms;
      break;
    case Event::kModuleCreate:
      s.modules_created += 1;
      s.module_create_ms += ms;
      if (s.module_create_each_ms.size() < kMaxListedCreates) {
        s.module_create_each_ms.push_back(ms);
      }
      break;
    case Event::kModuleShared:
      s.modules_shared += 1;
      break;
  }
}

}  // namespace load_stats

BundleLoadStats GetBundleLoadStats() {
  Tally& t = GetTally();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.stats;
}

}  // namespace cutecall
