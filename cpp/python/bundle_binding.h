// bundle_binding.h — the bundle reader (cpp/src/bundle.cc's
// ReadVerifiedBundle, the one reader of bundle manifests) as Python's
// `_core.read_bundle`, and `_core.arch_runs_on`.
//
// Contract: `read_bundle(path, expected_digest="", device_arch="")` verifies
// exactly what cutecall::Bundle::Open verifies and loads nothing; it returns
// a `_core.BundleContents` (digest, versions, entries with every manifest
// field and the verified object bytes) or raises ValueError/RuntimeError
// with the C++ message (bundle path, entry, file, field).
#ifndef CUTECALL_PYTHON_BUNDLE_BINDING_H_
#define CUTECALL_PYTHON_BUNDLE_BINDING_H_

#include <nanobind/nanobind.h>

namespace cutecall::py {

void BindBundle(nanobind::module_& m);

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_BUNDLE_BINDING_H_
