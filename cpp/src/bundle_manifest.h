// Internal to bundle.cc: the bundle manifest, format 1 (docs/bundles.md).
//
//   cutecall-bundle 2                 first line: the format version (1 or 2)
//   cutecall <version>                header fields, once each
//   dsl <version>
//   dsl-runtime <sha256> <ver> <path> format 2, optional: the DSL runtime
//   entry <name>                      then per kernel, a block of fields
//   kernel <name> ... end             (any order, each once; 'jax' optional)
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
#include <vector>

#include "cutecall/bundle.h"
#include "cutecall/launch_plan.h"
#include "cutecall/sha256.h"
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

// A bundle's manifest read and checked as Bundle::Open does, reading no
// object (bundle_read.cc): the manifest (its digest, versions, fields), the
// digest pin and device arch of `options`, and per entry (manifest order)
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
