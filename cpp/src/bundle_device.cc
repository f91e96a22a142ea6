// bundle_device.cc — a bundle entry against the GPU it is to run on
// (bundle_manifest.h): the entry's 'device-reads' field, the device's arch
// and properties (given, or read from the CUDA driver), and the check that
// the kernel was built for that device.
#include <cctype>
#include <charconv>
#include <utility>

#include "bundle_manifest.h"
#include "device_context.h"

namespace cutecall::bundle_internal {
namespace {

// The properties a device reports, under the names Python records a
// kernel's reads by (python/cutecall/_driver/hardware.py), and how a read
// value must compare with the device's for the kernel to be right there:
//   kEqual   the SM count: a persistent kernel's grid is one CTA per SM it
//            read (fewer SMs serialize its waves, more sit idle);
//   kAtMost  shared memory: a kernel sized its buffers by what it read, and
//            more than the device has cannot launch; less is fine;
//   kHint    L2: a tuning hint, the kernel is correct on any L2.
enum class Rule { kEqual, kAtMost, kHint };
struct Property {
  const char* name;
  int DeviceProperties::*field;
  Rule rule;
};
constexpr Property kProperties[] = {
    {"sm_count", &DeviceProperties::sm_count, Rule::kEqual},
    {"smem_per_block_optin", &DeviceProperties::smem_per_block_optin, Rule::kAtMost},
    {"smem_per_sm", &DeviceProperties::smem_per_sm, Rule::kAtMost},
    {"l2_bytes", &DeviceProperties::l2_bytes, Rule::kHint}};

bool Fits(Rule rule, int64_t read, int have) {
  switch (rule) {
    case Rule::kEqual: return read == have;
    case Rule::kAtMost: return read <= have;
    case Rule::kHint: return true;
  }
  return true;
}

bool ValidReadName(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '(' ||
          c == ')')) {
      return false;
    }
  }
  return true;
}

}  // namespace

Status ParseDeviceReads(std::string_view value,
                        std::vector<std::pair<std::string, int64_t>>* out) {
  for (size_t start = 0; !value.empty();) {
    const size_t comma = value.find(',', start);
    const std::string_view item = value.substr(
        start, comma == std::string_view::npos ? comma : comma - start);
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    int64_t v = -1;
    const char* end = item.data() + item.size();
    if (!ValidReadName(name) || eq == std::string_view::npos ||
        eq + 1 == item.size() ||
        std::from_chars(item.data() + eq + 1, end, v).ptr != end || v < 0) {
      return InvalidArgument("field 'device-reads' must be <name>=<value>,... "
                             "(a name of [A-Za-z0-9_()], a value >= 0), got '" +
                             std::string(item.substr(0, 80)) + "'");
    }
    for (const auto& read : *out) {
      if (read.first == name) {
        return InvalidArgument("field 'device-reads' names '" +
                               std::string(name) + "' twice");
      }
    }
    out->emplace_back(std::string(name), v);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return Status::Ok();
}

ErrorOr<TargetDevice> ResolveDevice(const BundleOptions& options,
                                    const std::string& who) {
  TargetDevice d{options.device_arch, options.device_properties};
  if (options.device < 0) return d;
  ErrorOr<const DriverTable*> driver = Driver();
  if (!driver.ok()) {
    return Status(driver.status().code(),
                  who + "option 'device' (" + std::to_string(options.device) +
                      "): " + driver.status().message());
  }
  if (d.arch.empty()) {
    ErrorOr<std::string> arch = DeviceArch(*driver.value(), options.device);
    if (!arch.ok()) return Status(arch.status().code(), who + arch.status().message());
    d.arch = arch.value();
  }
  ErrorOr<DeviceAttributes> read =
      ReadDeviceAttributes(*driver.value(), options.device);
  if (!read.ok()) return Status(read.status().code(), who + read.status().message());
  const DeviceProperties from_driver{read->sm_count, read->smem_per_block_optin,
                                     read->smem_per_sm, read->l2_bytes};
  for (const Property& p : kProperties) {
    if (d.properties.*p.field == 0) d.properties.*p.field = from_driver.*p.field;
  }
  return d;
}

Status CheckEntryDevice(const ManifestEntry& e, const TargetDevice& device,
                        const std::string& at) {
  if (!device.arch.empty() && !ArchRunsOn(e.arch, device.arch)) {
    return FailedPrecondition(at + "field 'arch' is " + e.arch +
                              ", which does not run on this GPU (" +
                              device.arch + "); re-export the bundle for " +
                              device.arch);
  }
  for (const auto& [name, value] : e.device_reads) {
    for (const Property& p : kProperties) {
      const int have = device.properties.*p.field;
      if (name != p.name || have == 0 || Fits(p.rule, value, have)) continue;
      return FailedPrecondition(
          at + "kernel '" + e.kernel + "' read " + name + " = " +
          std::to_string(value) + " of its device while it was traced "
          "(field 'device-reads'), but this GPU's " + name + " is " +
          std::to_string(have) + ": it was built for another GPU. Re-export "
          "the bundle on this GPU, or for it (cutecall.current_target(device="
          "...) or $CUTECALL_DEVICE naming its row of cutecall.DEVICES)");
    }
  }
  return Status::Ok();
}

}  // namespace cutecall::bundle_internal
