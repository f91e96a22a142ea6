// Internal to bundle.cc: the bundle manifest, format 3 (docs/bundles.md).
//
//   cutecall-bundle 3                 first line: the format version (1..3)
//   cutecall <version>                header fields, once each
//   dsl <version>
//   dsl-runtime <sha256> <ver> <path> format >= 2, optional: the DSL runtime
//   entry <name>                      then per kernel, a block of fields
//   kernel <name> ... end             (any order, each once; 'jax' and,
//                                     format >= 3, 'device-reads' optional)
//   manifest-sha256 <hex>             last line: SHA-256 of all bytes above
//
// Lines are "<field> <value>" ended by '\n'; the value is the rest of the
// line and may be empty. The parser checks syntax, the digest, versions and
// the value of every field; files are checked by the caller.
#ifndef CUTECALL_SRC_BUNDLE_MANIFEST_H_
#define CUTECALL_SRC_BUNDLE_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutecall/bundle.h"
#include "cutecall/launch_plan.h"
#include "sha256.h"
#include "cutecall/status.h"

namespace cutecall::bundle_internal {

struct ManifestEntry {
  std::string name;      // the exported name
  std::string kernel;    // the kernel's own name (errors)
  std::string key;       // specialization key, hex
  std::string arch;      // "sm_90a"
  std::string function;  // function prefix inside the object
  Digest sha256{};       // of the object file objects/<hex>.o
  size_t size = 0;       // of the object file
  std::vector<int64_t> plan;
  std::string operands;  // comma-separated names
  std::string symbols;   // comma-separated names
  size_t num_slots = 0;
  std::vector<std::string> scalar_types;           // "?" where unknown
  std::vector<std::string> scalar_names;           // "" where unknown
  std::string jax;  // the JAX call contract (JSON), "" where not recorded
  std::vector<std::vector<int32_t>> layouts;       // empty: unknown
  // 'device-reads': what the kernel read of its device while traced
  // ("sm_count" -> 132, ...), in field order; empty: it read nothing.
  std::vector<std::pair<std::string, int64_t>> device_reads;
};

struct Manifest {
  std::string digest;  // hex, the manifest-sha256 line
  std::string cutecall_version;
  std::string dsl_version;
  // 'dsl-runtime' (format 2): all empty when not recorded.
  std::string runtime_sha256;   // hex
  std::string runtime_version;  // e.g. nvidia-cutlass-dsl-libs-cu13==4.8.1
  std::string runtime_path;     // where it was at export
  std::vector<ManifestEntry> entries;  // in file order (sorted by name)
};

// `where` prefixes every error, e.g. "cutecall: bundle '/b': ".
ErrorOr<Manifest> ParseManifest(std::string_view text,
                                const std::string& where);

// The launch plan of entry `e` (errors name the entry's exported name),
// checked against the entry's 'num-slots' and 'layouts'. Errors are relative
// to the entry ("field 'plan': ...").
ErrorOr<LaunchPlan> ParseEntryPlan(const ManifestEntry& e);

// 'device-reads' "sm_count=132,max_active_clusters(2)=66" (names of
// [A-Za-z0-9_()], values >= 0, each name once; "" is none) into `out`
// (bundle_device.cc). Errors are relative to the entry ("field ...").
Status ParseDeviceReads(std::string_view value,
                        std::vector<std::pair<std::string, int64_t>>* out);

// The GPU entries are checked against: `options`' device_arch and
// device_properties, each one left empty read from CUDA device
// options.device (when >= 0) through the driver (device_context.h).
// `who` prefixes errors.
struct TargetDevice {
  std::string arch;  // "" : not checked
  DeviceProperties properties;
};
ErrorOr<TargetDevice> ResolveDevice(const BundleOptions& options,
                                    const std::string& who);

// Entry `e` against `device`: its arch runs there, and what its kernel
// read while traced fits the device: the same sm_count, no more
// smem_per_block_optin or smem_per_sm than the device has (bundle_device.cc
// says why). l2_bytes (a tuning hint) and other names
// (max_active_clusters(n), which follows from the arch and the SM count)
// are not compared, nor properties the device leaves 0. Errors are
// FailedPrecondition naming the kernel, the property, both values and what
// to do; `at` prefixes them.
Status CheckEntryDevice(const ManifestEntry& e, const TargetDevice& device,
                        const std::string& at);

// A bundle's manifest read and checked as Bundle::Open does, reading no
// object (bundle_read.cc): the manifest (its digest, versions, fields), the
// digest pin of `options`, each entry against the device (ResolveDevice,
// CheckEntryDevice), and per entry (manifest order)
// its launch plan and its object file: there, not writable by other users,
// of the recorded size. Errors name the bundle path, the entry, the file
// and the field.
struct CheckedManifest {
  Manifest manifest;
  std::vector<LaunchPlan> plans;
};
ErrorOr<CheckedManifest> ReadCheckedManifest(const std::string& path,
                                             const BundleOptions& options);

// "objects/<sha256 hex>.o": entry `e`'s object, relative to its bundle.
std::string ObjectFile(const ManifestEntry& e);

// Entry `e`'s object in bundle `path`, read and verified: its size, SHA-256
// and ELF symbols (the function's). `at` prefixes errors, e.g.
// "cutecall: bundle '/b': entry 'add': ".
ErrorOr<std::string> ReadVerifiedObject(const std::string& path,
                                        const ManifestEntry& e,
                                        const std::string& at);

// A bundle read and verified whole, before anything is loaded: the checked
// manifest, then every object's bytes (ReadVerifiedObject). Errors name the
// bundle path, the entry, the file and the field. Eager Opens use it, and
// `_core.read_bundle` exposes it to Python: the one reader.
struct VerifiedBundle {
  Manifest manifest;
  std::vector<std::string> objects;
  std::vector<LaunchPlan> plans;
};
ErrorOr<VerifiedBundle> ReadVerifiedBundle(const std::string& path,
                                           const BundleOptions& options);

}  // namespace cutecall::bundle_internal

#endif  // CUTECALL_SRC_BUNDLE_MANIFEST_H_
