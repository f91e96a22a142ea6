// bundle_read.cc — reading and verifying a bundle's files before anything
// loads (bundle_manifest.h): the manifest and its entries at Open, each
// object right before its module loads, or all of them at once.
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <utility>

#include "bundle_manifest.h"
#include "elf.h"
#include "load_stats.h"

namespace cutecall::bundle_internal {
namespace {

// Refuses a file other users may write: its bytes become machine code.
Status CheckFile(const std::string& path, const std::string& shown,
                 const std::string& who, struct stat* st) {
  if (::stat(path.c_str(), st) != 0) {
    return NotFound(who + "missing file '" + shown + "'");
  }
  if (st->st_mode & S_IWOTH) {
    return FailedPrecondition(who + "'" + shown + "' is writable by other "
                              "users; refusing to load machine code from it");
  }
  return Status::Ok();
}

// Reads the file at `path` whole, after CheckFile.
Status ReadWhole(const std::string& path, const std::string& shown,
                 const std::string& who, std::string* out) {
  struct stat st;
  if (Status s = CheckFile(path, shown, who, &st); !s.ok()) return s;
  std::ifstream in(path, std::ios::binary);
  out->assign(std::istreambuf_iterator<char>(in), {});
  if (!in.good() && !in.eof()) {
    return FailedPrecondition(who + "cannot read '" + shown + "'");
  }
  return Status::Ok();
}

Status SizeError(const std::string& at, const std::string& rel, size_t have,
                 size_t want) {
  return InvalidArgument(at + "object '" + rel + "' has " +
                         std::to_string(have) + " bytes, field 'size' says " +
                         std::to_string(want) + " (truncated?)");
}

}  // namespace

std::string ObjectFile(const ManifestEntry& e) {
  return "objects/" + ToHex(e.sha256) + ".o";
}

ErrorOr<CheckedManifest> ReadCheckedManifest(const std::string& path,
                                             const BundleOptions& options) {
  const load_stats::Stopwatch watch;
  const std::string who = "cutecall: bundle '" + path + "': ";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFound(who + "no such directory");
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(who + "not a directory");
  if (st.st_mode & S_IWOTH) {
    return FailedPrecondition(who + "the directory is writable by other users;"
                              " refusing to load machine code from it");
  }
  std::string text;
  if (Status s = ReadWhole(path + "/" + kBundleManifest, kBundleManifest, who,
                           &text);
      !s.ok()) {
    return s;
  }
  ErrorOr<Manifest> m = ParseManifest(text, who);
  if (!m.ok()) return m.status();
  if (!options.expected_digest.empty() &&
      options.expected_digest != m->digest) {
    return InvalidArgument(who + "field 'manifest-sha256' is " + m->digest +
                           ", expected " + options.expected_digest);
  }
  ErrorOr<TargetDevice> device = ResolveDevice(options, who);
  if (!device.ok()) return device.status();
  CheckedManifest out;
  for (const ManifestEntry& e : m->entries) {
    const std::string at = who + "entry '" + e.name + "': ";
    if (Status s = CheckEntryDevice(e, device.value(), at); !s.ok()) return s;
    const std::string rel = ObjectFile(e);
    if (Status s = CheckFile(path + "/" + rel, rel, at, &st); !s.ok()) return s;
    if (size_t(st.st_size) != e.size) return SizeError(at, rel, size_t(st.st_size), e.size);
    ErrorOr<LaunchPlan> plan = ParseEntryPlan(e);
    if (!plan.ok()) {
      return Status(plan.status().code(), at + plan.status().message());
    }
    out.plans.push_back(std::move(plan).value());
  }
  out.manifest = std::move(m).value();
  load_stats::Record(load_stats::Event::kManifest, watch.Ms());
  return out;
}

ErrorOr<std::string> ReadVerifiedObject(const std::string& path,
                                        const ManifestEntry& e,
                                        const std::string& at) {
  const load_stats::Stopwatch watch;
  const std::string rel = ObjectFile(e);
  std::string bytes;
  if (Status s = ReadWhole(path + "/" + rel, rel, at, &bytes); !s.ok()) {
    return s;
  }
  if (bytes.size() != e.size) return SizeError(at, rel, bytes.size(), e.size);
  if (const Digest have = Sha256(bytes); have != e.sha256) {
    return InvalidArgument(at + "object '" + rel + "' has SHA-256 " +
                           ToHex(have) + ", field 'sha256' says " +
                           ToHex(e.sha256) + " (tampered or corrupt)");
  }
  if (Status s = CheckElfDefines(bytes, e.function + "_version"); !s.ok()) {
    return Status(s.code(), at + "field 'function': " + s.message());
  }
  load_stats::Record(load_stats::Event::kObjectVerify, watch.Ms());
  return bytes;
}

ErrorOr<VerifiedBundle> ReadVerifiedBundle(const std::string& path,
                                           const BundleOptions& options) {
  ErrorOr<CheckedManifest> checked = ReadCheckedManifest(path, options);
  if (!checked.ok()) return checked.status();
  VerifiedBundle out;
  out.manifest = std::move(checked->manifest);
  out.plans = std::move(checked->plans);
  const std::string who = "cutecall: bundle '" + path + "': ";
  for (const ManifestEntry& e : out.manifest.entries) {
    ErrorOr<std::string> bytes =
        ReadVerifiedObject(path, e, who + "entry '" + e.name + "': ");
    if (!bytes.ok()) return bytes.status();
    out.objects.push_back(std::move(bytes).value());
  }
  return out;
}

}  // namespace cutecall::bundle_internal
