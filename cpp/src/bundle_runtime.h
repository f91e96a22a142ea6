// Internal to bundle.cc: which CuTe DSL runtime library a bundle opens with.
//
// A format-2 bundle records the runtime its objects were compiled against
// ('dsl-runtime': SHA-256, version, path at export). ChooseRuntime picks the
// library, in this order, and tells the runtime table (SetRuntimeLibraryPath):
//   1. the path already configured: SetRuntimeLibraryPath or
//      $CUTECALL_DSL_RUNTIME (or the library this process already loaded);
//   2. the path recorded at export, if the file there still matches;
//   3. the nvidia-cutlass-dsl libs (cu13, then cu12) of each python3 on PATH
//      (its prefix's lib/python3.*/site-packages, and ~/.local), the first
//      that matches.
// A library's identity is the SHA-256 its wheel's RECORD lists for it (the
// file's size checked against RECORD's), else the SHA-256 of its bytes;
// identities are computed once per path per process. A configured library
// that does not match, or no matching library at all, is an error naming
// the version the bundle needs and every version found.
#ifndef CUTECALL_SRC_BUNDLE_RUNTIME_H_
#define CUTECALL_SRC_BUNDLE_RUNTIME_H_

#include <string>
#include <vector>

#include "bundle_manifest.h"
#include "cutecall/status.h"

namespace cutecall::bundle_internal {

struct RuntimeIdentity {
  std::string sha256;   // hex
  std::string version;  // "nvidia-cutlass-dsl-libs-cu13==4.8.1", or "unknown"
};

// The identity of the library at `path`; NotFound when there is no file.
ErrorOr<RuntimeIdentity> IdentifyRuntime(const std::string& path);

// libcute_dsl_runtime.so of the python3 executables on $PATH, in order.
std::vector<std::string> PythonRuntimeCandidates();

// Chooses the runtime for manifest `m` as above and configures it; returns
// its path ("" for a format-1 bundle when none is configured or found: the
// runtime table then reports the missing library). `who` prefixes errors.
ErrorOr<std::string> ChooseRuntime(const Manifest& m, const std::string& who);

}  // namespace cutecall::bundle_internal

#endif  // CUTECALL_SRC_BUNDLE_RUNTIME_H_
