// The bundle tests' fixture: bundles written in format 1 (as cutecall.export
// writes them) around the test ELF object, in a fresh directory per test,
// run against the fake runtime (fake_runtime.h).
#ifndef CUTECALL_TESTS_BUNDLE_FIXTURE_H_
#define CUTECALL_TESTS_BUNDLE_FIXTURE_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cutecall/abi.h"
#include "sha256.h"
#include "plan_builder.h"
#include "test_util.h"

namespace cutecall {

namespace fs = std::filesystem;
using cutecall_test::DynamicOperand;
using cutecall_test::Encode;
using cutecall_test::PlanSpec;
using cutecall_test::TestObjectBytes;

inline std::string Join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

// saxpy: out = f(x, y, alpha): three rank-1 dynamic operands + one scalar.
inline std::vector<int64_t> SaxpyPlan() { return Encode(cutecall_test::SaxpySpec()); }

// mat: out = f(x), rank 2, both dims dynamic, row-major.
inline std::vector<int64_t> MatPlan() {
  PlanSpec p;
  p.num_args = 1;
  p.num_rets = 1;
  p.operands = {DynamicOperand(abi::Source::kArg, 0, 2),
                DynamicOperand(abi::Source::kRet, 0, 2)};
  return Encode(p);
}

inline std::string Seal(const std::string& body) {
  return body + "manifest-sha256 " + ToHex(Sha256(body)) + "\n";
}

// Two entries, "mat" (function cc_other) and "saxpy" (cc_test), one object.
class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cutecall_bundle_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    object_hex_ = ToHex(Sha256(TestObjectBytes()));
    fs::create_directory(dir_ + "/objects");
    Write(ObjectPath(), TestObjectBytes());
    body_ = "cutecall-bundle 1\ncutecall 0.1.0\ndsl 4.8.1\n" +
            Entry("mat", "cc_other", MatPlan(), "x,out", "", 6, "", "1,0;1,0") +
            Entry("saxpy", "cc_test", SaxpyPlan(), "x,y,out", "", 7,
                  "Float32:alpha", "0;0;0");
    Write(dir_ + "/manifest.txt", Seal(body_));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Entry(const std::string& name, const std::string& function,
                    const std::vector<int64_t>& plan, const std::string& ops,
                    const std::string& symbols, int slots,
                    const std::string& scalars, const std::string& layouts) {
    return "entry " + name + "\nkernel " + name + "\nkey " +
           std::string(64, 'a') + "\narch sm_90a\nfunction " + function +
           "\nsha256 " + object_hex_ + "\nsize " +
           std::to_string(TestObjectBytes().size()) + "\nplan-version " +
           std::to_string(plan[0]) + "\nplan " + Join(plan) + "\noperands " +
           ops + "\nsymbols" + (symbols.empty() ? "" : " " + symbols) +
           "\nnum-slots " + std::to_string(slots) + "\nscalars" +
           (scalars.empty() ? "" : " " + scalars) + "\nlayouts " + layouts +
           "\njax {\"python\":\"only\"}\nend\n";
  }
  static void Write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string ObjectPath() const {
    return dir_ + "/objects/" + object_hex_ + ".o";
  }
  // Rewrites the manifest with `from` replaced by `to`, sealed or not.
  void EditManifest(const std::string& from, const std::string& to,
                    bool reseal) {
    std::string body = body_;
    size_t at = body.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    body.replace(at, from.size(), to);
    std::string text = reseal ? Seal(body) : Seal(body_);
    if (!reseal) text.replace(text.find(from), from.size(), to);
    Write(dir_ + "/manifest.txt", text);
  }

  std::string dir_;
  std::string object_hex_;
  std::string body_;
};

}  // namespace cutecall

#endif  // CUTECALL_TESTS_BUNDLE_FIXTURE_H_
