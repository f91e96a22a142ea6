// Fuzz target: the bundle manifest parser, bundle_internal::ParseManifest
// (cpp/src/bundle_manifest.cc), then what Bundle::Open runs on each entry's
// fields before it reads any object: ParseEntryPlan (the plan against
// 'num-slots' and 'layouts'), ArchRunsOn (the entry's 'arch') and
// CheckEntryDevice (the entry against a GPU: its arch, 'device-reads').
//
// Input: the bytes of a manifest.txt (cpp/fuzz/corpus/bundle_manifest,
// written by make_corpus.cc; tokens in bundle_manifest.dict). Each input is
// parsed twice: as given, and resealed (its last line replaced by the
// 'manifest-sha256' line of the bytes above it) so that mutations get past
// the digest to the field checks.
// Beyond ASan/UBSan, checks what Bundle::Open relies on in a parsed
// manifest: entries exist, names are unique, each plan starts with its
// version and has as many scalar types (and layouts, where given) as its
// header says, an accepted plan matches 'num-slots', device reads are
// named once each with values >= 0, and an entry passes the check against
// a GPU of its arch with the properties its kernel read.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "bundle_manifest.h"
#include "cutecall/abi.h"
#include "cutecall/bundle.h"
#include "sha256.h"

namespace {

using cutecall::bundle_internal::Manifest;
using cutecall::bundle_internal::ManifestEntry;
namespace abi = cutecall::abi;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "manifest contract broken: %s\n", what);
    std::abort();
  }
}

// `text` with its last line replaced by the digest line of what precedes it.
std::string Reseal(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  size_t last = text.rfind('\n');
  std::string body(last == std::string_view::npos
                       ? std::string_view()
                       : text.substr(0, last + 1));
  return body + "manifest-sha256 " + cutecall::ToHex(cutecall::Sha256(body)) +
         "\n";
}

// The device checks: a GPU of the entry's arch with the properties its
// kernel read passes; one with other properties fails or passes by them.
void CheckDevice(const ManifestEntry& e) {
  std::set<std::string> names;
  cutecall::bundle_internal::TargetDevice same{e.arch, {}};
  for (const auto& [name, value] : e.device_reads) {
    Check(names.insert(name).second && value >= 0, "device reads");
    const int v = value > INT32_MAX ? 0 : int(value);  // 0: not compared
    if (name == "sm_count") same.properties.sm_count = v;
    if (name == "smem_per_block_optin") same.properties.smem_per_block_optin = v;
    if (name == "smem_per_sm") same.properties.smem_per_sm = v;
    if (name == "l2_bytes") same.properties.l2_bytes = v;
  }
  Check(cutecall::bundle_internal::CheckEntryDevice(e, same, "fuzz: ").ok(),
        "an entry fails on the device it read");
  cutecall::bundle_internal::TargetDevice other{"sm_90a", {132, 1, 2, 3}};
  cutecall::Status s = cutecall::bundle_internal::CheckEntryDevice(e, other, "fuzz: ");
  Check(s.ok() || s.code() == cutecall::Code::kFailedPrecondition, "device error code");
}

void CheckEntry(const ManifestEntry& e) {
  Check(!e.name.empty() && !e.kernel.empty() && !e.function.empty(),
        "empty name, kernel or function");
  Check(e.size > 0, "size");
  Check(e.plan.size() >= abi::kHeaderSize, "plan shorter than its header");
  Check(e.plan[0] >= abi::kOldestPlanVersion && e.plan[0] <= abi::kPlanVersion,
        "plan version");
  Check(int64_t(e.scalar_types.size()) == e.plan[4], "scalar count");
  Check(e.layouts.empty() || int64_t(e.layouts.size()) == e.plan[3],
        "layout count");
  cutecall::ErrorOr<cutecall::LaunchPlan> plan =
      cutecall::bundle_internal::ParseEntryPlan(e);
  if (plan.ok()) {
    Check(plan->num_slots() == e.num_slots, "num-slots");
    Check(plan->num_scalars() == e.scalar_types.size(), "scalars");
    Check(plan->kernel_name() == e.name, "errors name the entry");
  } else {
    Check(!plan.status().message().empty(), "error without a message");
  }
  // An arch runs on itself; device archs as cudaGetDeviceProperties names
  // them, and the entry's arch read as a device's.
  Check(cutecall::ArchRunsOn(e.arch, e.arch), "arch does not run on itself");
  for (const char* device : {"sm_80", "sm_90", "sm_90a", "sm_100a", "sm_120"}) {
    cutecall::ArchRunsOn(e.arch, device);
    cutecall::ArchRunsOn(device, e.arch);
  }
  CheckDevice(e);
}

void Parse(std::string_view text) {
  cutecall::ErrorOr<Manifest> m =
      cutecall::bundle_internal::ParseManifest(text, "fuzz: ");
  if (!m.ok()) {
    Check(m.status().message().rfind("fuzz: manifest.txt: ", 0) == 0,
          "error does not name the file");
    return;
  }
  Check(!m->entries.empty(), "no entries");
  Check(m->digest.size() == 64, "digest");
  std::set<std::string> names;
  for (const ManifestEntry& e : m->entries) {
    Check(names.insert(e.name).second, "repeated entry name");
    CheckEntry(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Parse(text);
  Parse(Reseal(text));
  return 0;
}
