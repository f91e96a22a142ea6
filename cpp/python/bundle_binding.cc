// bundle_binding.cc — `_core.read_bundle` and its result types
// (bundle_binding.h).
#include "bundle_binding.h"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

#include "bundle_manifest.h"
#include "cutecall/bundle.h"
#include "sha256.h"
#include "raise.h"

namespace nb = nanobind;

namespace cutecall::py {
namespace {

// One verified entry: its manifest fields and object bytes.
struct BundleEntry {
  bundle_internal::ManifestEntry fields;
  nb::bytes module;
};

struct BundleContents {
  std::string path, digest, cutecall_version, dsl_version;
  std::vector<BundleEntry> entries;  // sorted by name
};

// `props`: None, or a mapping as _core.device_props returns (other keys
// ignored, missing ones not checked).
DeviceProperties ToDeviceProperties(const nb::object& props) {
  DeviceProperties p;
  if (props.is_none()) return p;
  nb::dict d = nb::cast<nb::dict>(props);
  const std::pair<const char*, int DeviceProperties::*> fields[] = {
      {"sm_count", &DeviceProperties::sm_count},
      {"smem_per_block_optin", &DeviceProperties::smem_per_block_optin},
      {"smem_per_sm", &DeviceProperties::smem_per_sm},
      {"l2_bytes", &DeviceProperties::l2_bytes}};
  for (const auto& [name, field] : fields) {
    if (d.contains(name)) p.*field = nb::cast<int>(d[name]);
  }
  return p;
}

BundleContents ReadBundle(const std::string& path,
                          const std::string& expected_digest,
                          const std::string& device_arch,
                          const nb::object& device_props) {
  BundleOptions options;
  options.expected_digest = expected_digest;
  options.device_arch = device_arch;
  options.device_properties = ToDeviceProperties(device_props);
  ErrorOr<bundle_internal::VerifiedBundle> read =
      bundle_internal::ReadVerifiedBundle(path, options);
  if (!read.ok()) Raise(read.status());
  bundle_internal::VerifiedBundle& v = read.value();
  BundleContents out{path, v.manifest.digest, v.manifest.cutecall_version,
                     v.manifest.dsl_version, {}};
  for (size_t i = 0; i < v.manifest.entries.size(); ++i) {
    out.entries.push_back(BundleEntry{
        std::move(v.manifest.entries[i]),
        nb::bytes(v.objects[i].data(), v.objects[i].size())});
  }
  return out;
}

template <typename T>
auto Field(T bundle_internal::ManifestEntry::*member) {
  return [member](const BundleEntry& e) -> const T& { return e.fields.*member; };
}

}  // namespace

void BindBundle(nb::module_& m) {
  using E = bundle_internal::ManifestEntry;
  nb::class_<BundleEntry>(m, "BundleEntry",
                          "One verified bundle entry: its manifest fields "
                          "(docs/bundles.md) and object bytes.")
      .def_prop_ro("name", Field(&E::name))
      .def_prop_ro("kernel", Field(&E::kernel))
      .def_prop_ro("key", Field(&E::key))
      .def_prop_ro("arch", Field(&E::arch))
      .def_prop_ro("function", Field(&E::function))
      .def_prop_ro("sha256", [](const BundleEntry& e) { return ToHex(e.fields.sha256); })
      .def_prop_ro("plan", Field(&E::plan))
      .def_prop_ro("operand_names", Field(&E::operands))
      .def_prop_ro("symbol_names", Field(&E::symbols))
      .def_prop_ro("num_slots", Field(&E::num_slots))
      .def_prop_ro("scalar_types", Field(&E::scalar_types))
      .def_prop_ro("scalar_names", Field(&E::scalar_names))
      .def_prop_ro("layouts", Field(&E::layouts))
      .def_prop_ro("jax", Field(&E::jax))
      .def_prop_ro("device_reads", Field(&E::device_reads))
      .def_ro("module", &BundleEntry::module);
  nb::class_<BundleContents>(m, "BundleContents",
                             "A bundle read and verified by read_bundle.")
      .def_ro("path", &BundleContents::path)
      .def_ro("digest", &BundleContents::digest)
      .def_ro("cutecall_version", &BundleContents::cutecall_version)
      .def_ro("dsl_version", &BundleContents::dsl_version)
      .def_ro("entries", &BundleContents::entries);
  m.def("read_bundle", &ReadBundle, nb::arg("path"),
        nb::arg("expected_digest") = "", nb::arg("device_arch") = "",
        nb::arg("device_props") = nb::none(),
        "Reads and verifies a bundle as the C++ Bundle::Open does, loading "
        "nothing; raises with the C++ message. `device_props` (as "
        "device_props returns them, or None) are compared with what each "
        "entry's kernel read of its device while traced.");
  m.def("arch_runs_on",
        [](const std::string& arch, const std::string& device_arch) {
          return ArchRunsOn(arch, device_arch);
        },
        nb::arg("arch"), nb::arg("device_arch"),
        "Whether code compiled for `arch` runs on a GPU of `device_arch`.");
}

}  // namespace cutecall::py
