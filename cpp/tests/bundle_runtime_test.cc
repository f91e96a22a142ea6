// Which DSL runtime a bundle opens with (cpp/src/bundle_runtime.h): the
// identity from a wheel's RECORD or the file's bytes, the python3-on-PATH
// scan, and the order configured > recorded > scanned, with mismatches
// named. Plus the C ABI's error surface (cutecall/cutecall_c.h). No
// runtime is ever loaded here: only paths are configured.
#include "bundle_runtime.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cutecall/cutecall_c.h"
#include "cutecall/runtime_table.h"
#include "sha256.h"
#include "test_util.h"

namespace cutecall::bundle_internal {
namespace {

namespace fs = std::filesystem;
using cutecall_test::IsError;

void Write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// urlsafe base64 without padding, as wheel RECORDs hold digests.
std::string B64(const Digest& d) {
  const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : d) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(a[(acc >> bits) & 63]);
    }
  }
  if (bits) out.push_back(a[(acc << (6 - bits)) & 63]);
  return out;
}

class RuntimeChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cutecall_runtime_choice.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    old_path_ = getenv("PATH") ? getenv("PATH") : "";
    unsetenv("CUTECALL_DSL_RUNTIME");
    SetRuntimeLibraryPath("");
  }
  void TearDown() override {
    setenv("PATH", old_path_.c_str(), 1);
    unsetenv("CUTECALL_DSL_RUNTIME");
    SetRuntimeLibraryPath("");
    fs::remove_all(dir_);
  }
  // A venv at dir_/name with python3 and the cu13 runtime `bytes`, listed
  // in its wheel's RECORD; returns the library's path.
  std::string Venv(const std::string& name, const std::string& bytes,
                   const std::string& version, const std::string& eol = "\n") {
    const fs::path venv = dir_ / name;
    Write(venv / "bin/python3", "#!/bin/sh\n");
    chmod((venv / "bin/python3").c_str(), 0755);
    const fs::path site = venv / "lib/python3.12/site-packages";
    const std::string rel = "nvidia_cutlass_dsl/cu13/lib/libcute_dsl_runtime.so";
    Write(site / rel, bytes);
    Write(site / ("nvidia_cutlass_dsl_libs_cu13-" + version + ".dist-info/RECORD"),
          "other,sha256=x,1" + eol + rel + ",sha256=" + B64(Sha256(bytes)) + "," +
              std::to_string(bytes.size()) + eol);
    return (site / rel).string();
  }
  Manifest Wants(const std::string& bytes, const std::string& version,
                 const std::string& path) {
    Manifest m;
    m.runtime_sha256 = ToHex(Sha256(bytes));
    m.runtime_version = "nvidia-cutlass-dsl-libs-cu13==" + version;
    m.runtime_path = path;
    return m;
  }
  fs::path dir_;
  std::string old_path_;
};

TEST_F(RuntimeChoiceTest, IdentityComesFromRecordElseTheBytes) {
  const std::string lib = Venv("v", "runtime 4.8.1", "4.8.1");
  auto id = IdentifyRuntime(lib);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->version, "nvidia-cutlass-dsl-libs-cu13==4.8.1");
  EXPECT_EQ(id->sha256, ToHex(Sha256("runtime 4.8.1")));
  Write(dir_ / "loose/libcute_dsl_runtime.so", "loose bytes");
  auto loose = IdentifyRuntime((dir_ / "loose/libcute_dsl_runtime.so").string());
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(loose->version, "unknown");
  EXPECT_EQ(loose->sha256, ToHex(Sha256("loose bytes")));
  EXPECT_TRUE(IsError(IdentifyRuntime((dir_ / "none.so").string()), Code::kNotFound,
                      {"none.so"}));
}

// pip writes RECORD with "\r\n" line ends. Missing them made every real
// runtime's identity fall back to hashing its 43 MB (most of a cold Open).
TEST_F(RuntimeChoiceTest, IdentityReadsRecordsPipWrote) {
  const std::string lib = Venv("pip", "runtime 4.8.2", "4.8.2", "\r\n");
  auto id = IdentifyRuntime(lib);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->version, "nvidia-cutlass-dsl-libs-cu13==4.8.2");
  EXPECT_EQ(id->sha256, ToHex(Sha256("runtime 4.8.2")));
}

TEST_F(RuntimeChoiceTest, FindsTheMatchingPythonOnPath) {
  const std::string old_lib = Venv("old", "runtime 4.7.0", "4.7.0");
  const std::string new_lib = Venv("new", "runtime 4.8.1", "4.8.1");
  setenv("PATH", ((dir_ / "old/bin").string() + ":" + (dir_ / "new/bin").string()).c_str(), 1);
  auto candidates = PythonRuntimeCandidates();
  ASSERT_GE(candidates.size(), 2u);
  // The recorded path is gone: the scan picks the matching one, not the first.
  auto chosen = ChooseRuntime(Wants("runtime 4.8.1", "4.8.1", "/gone/lib.so"), "b: ");
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(fs::canonical(*chosen), fs::canonical(new_lib));
  EXPECT_EQ(RuntimeLibraryPath(), *chosen);
}

TEST_F(RuntimeChoiceTest, RecordedPathBeforeTheScan) {
  const std::string lib = Venv("a", "runtime 4.8.1", "4.8.1");
  Venv("b", "runtime 4.8.1", "4.8.1");
  setenv("PATH", (dir_ / "b/bin").c_str(), 1);
  auto chosen = ChooseRuntime(Wants("runtime 4.8.1", "4.8.1", lib), "b: ");
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(*chosen, lib);
}

TEST_F(RuntimeChoiceTest, MismatchesNameBothVersions) {
  const std::string old_lib = Venv("old", "runtime 4.7.0", "4.7.0");
  setenv("PATH", (dir_ / "old/bin").c_str(), 1);
  EXPECT_TRUE(IsError(ChooseRuntime(Wants("runtime 4.8.1", "4.8.1", "/gone"), "b: "),
                      Code::kFailedPrecondition,
                      {"b: ", "no CuTe DSL runtime matching", "==4.8.1", "==4.7.0",
                       "CUTECALL_DSL_RUNTIME"}));
  setenv("CUTECALL_DSL_RUNTIME", old_lib.c_str(), 1);
  EXPECT_TRUE(IsError(ChooseRuntime(Wants("runtime 4.8.1", "4.8.1", "/gone"), "b: "),
                      Code::kFailedPrecondition,
                      {"need the CuTe DSL runtime nvidia-cutlass-dsl-libs-cu13==4.8.1",
                       "the configured runtime", "==4.7.0"}));
  // A bundle that records no runtime takes the configured one as it is.
  auto any = ChooseRuntime(Manifest(), "b: ");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(*any, old_lib);
}

TEST(CApiTest, ErrorsCarryCodesAndMessages) {
  cutecall_bundle* b = reinterpret_cast<cutecall_bundle*>(1);
  EXPECT_EQ(cutecall_bundle_open("/no/such/bundle", nullptr, &b), CUTECALL_ERROR_NOT_FOUND);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(std::string(cutecall_last_error()).find("/no/such/bundle"), std::string::npos);
  EXPECT_EQ(cutecall_bundle_open(nullptr, nullptr, &b), CUTECALL_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cutecall_last_error()).find("'path' is NULL"), std::string::npos);
  EXPECT_EQ(cutecall_kernel_run(nullptr, nullptr, nullptr, 0, nullptr, 0, nullptr, 0),
            CUTECALL_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(cutecall_status_name(CUTECALL_ERROR_INTERNAL), "CUTECALL_ERROR_INTERNAL");
  EXPECT_STREQ(cutecall_status_name(cutecall_status(99)), "CUTECALL_UNKNOWN_STATUS");
  for (int s = 0; s <= 4; ++s) {
    EXPECT_GT(std::string(cutecall_status_message(cutecall_status(s))).size(), 5u);
  }
  EXPECT_EQ(cutecall_scalar_f32(1.5f).bits, 0x3FC00000u);
  EXPECT_EQ(cutecall_scalar_i32(-1).bits, ~uint64_t(0));
  cutecall_bundle_close(nullptr);
}

}  // namespace
}  // namespace cutecall::bundle_internal
