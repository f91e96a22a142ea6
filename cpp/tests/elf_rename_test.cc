// RenameUndefinedSymbol (elf.h): on a gcc-compiled object, on
// hand-built objects shaped as LLVM writes CuTe DSL modules, and on every
// refusal and malformed input.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "elf.h"
#include "elf_builder.h"
#include "test_util.h"

namespace cutecall {
namespace {

using cutecall_test::BuildElfObject;
using cutecall_test::DslLikeObject;
using cutecall_test::ElfObjectSpec;
using cutecall_test::IsError;
using cutecall_test::IsOk;
using cutecall_test::kTextSection;
using cutecall_test::TestObjectBytes;

constexpr char kFrom[] = "_cudaLaunchKernelEx";
constexpr char kTo[] = "cutecall_launch_kex";
constexpr size_t kLen = sizeof(kFrom) - 1;

// Whether `after` differs from `before` only in whole windows that held
// kFrom and now hold kTo; counts them in *windows.
::testing::AssertionResult OnlyNamesChanged(const std::string& before,
                                            const std::string& after,
                                            int* windows = nullptr) {
  if (before.size() != after.size()) {
    return ::testing::AssertionFailure() << "size changed";
  }
  int n = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i] == after[i]) continue;
    if (i + kLen > before.size() || before.compare(i, kLen, kFrom) != 0 ||
        after.compare(i, kLen, kTo) != 0) {
      return ::testing::AssertionFailure() << "byte " << i << " changed";
    }
    ++n;
    i += kLen - 1;
  }
  if (windows != nullptr) *windows = n;
  return ::testing::AssertionSuccess();
}

// Renames kFrom to kTo in `object` and checks everything a success means.
void ExpectRenamed(const std::string& object, int expected_windows = 1) {
  std::string renamed = object;
  ASSERT_TRUE(IsOk(RenameUndefinedSymbol(&renamed, kFrom, kTo)));
  int windows = 0;
  EXPECT_TRUE(OnlyNamesChanged(object, renamed, &windows));
  EXPECT_EQ(windows, expected_windows);
  // The import is gone; nothing became defined; renaming back restores.
  std::string again = renamed;
  EXPECT_TRUE(IsError(RenameUndefinedSymbol(&again, kFrom, kTo),
                      Code::kNotFound, {"imports no symbol '_cudaLaunchKernelEx'"}));
  EXPECT_EQ(again, renamed);
  EXPECT_TRUE(IsError(CheckElfDefines(renamed, kTo), Code::kNotFound, {}));
  ASSERT_TRUE(IsOk(RenameUndefinedSymbol(&again, kTo, kFrom)));
  EXPECT_EQ(again, object);
}

// Expects the rename refused with `code` and `fragments`, bytes unchanged.
void ExpectRefused(const std::string& object, Code code,
                   std::initializer_list<std::string_view> fragments) {
  std::string copy = object;
  EXPECT_TRUE(IsError(RenameUndefinedSymbol(&copy, kFrom, kTo), code, fragments));
  EXPECT_EQ(copy, object);
}

TEST(RenameUndefinedSymbolTest, RenamesTheImportOfACompiledObject) {
  const std::string& object = TestObjectBytes();  // gcc: separate .shstrtab
  ASSERT_NE(object.find(kFrom), std::string::npos);
  ExpectRenamed(object);
  std::string renamed = object;
  ASSERT_TRUE(IsOk(RenameUndefinedSymbol(&renamed, kFrom, kTo)));
  EXPECT_TRUE(IsOk(CheckElfDefines(renamed, "cc_test_version")));
  EXPECT_TRUE(IsOk(CheckElfDefines(renamed, "cc_test_launch")));
}

TEST(RenameUndefinedSymbolTest, RenamesInAStringTableSharedWithSectionNames) {
  ExpectRenamed(BuildElfObject(DslLikeObject()));  // as LLVM writes it
  ElfObjectSpec separate = DslLikeObject();
  separate.shared_section_names = false;
  ExpectRenamed(BuildElfObject(separate));
}

TEST(RenameUndefinedSymbolTest, RenamesOtherImportsOfTheSameLength) {
  std::string object = TestObjectBytes();
  ASSERT_TRUE(IsOk(RenameUndefinedSymbol(&object, "cc_test_missing",
                                         "cc_test_MISSING")));
  EXPECT_NE(object.find("cc_test_MISSING"), std::string::npos);
}

TEST(RenameUndefinedSymbolTest, EveryImportOfTheNameIsRenamed) {
  ElfObjectSpec one_string = DslLikeObject();  // two entries, one name
  one_string.symbols.push_back(one_string.symbols[1]);
  ExpectRenamed(BuildElfObject(one_string), 1);
  ElfObjectSpec two_strings = DslLikeObject();  // two copies of the name
  two_strings.symbols.push_back({two_strings.strings.Add(kFrom), 0});
  ExpectRenamed(BuildElfObject(two_strings), 2);
}

TEST(RenameUndefinedSymbolTest, AnAbsentImportIsNotFound) {
  std::string object = TestObjectBytes();
  EXPECT_TRUE(IsError(RenameUndefinedSymbol(&object, "_cudaLaunchKernelEy", kTo),
                      Code::kNotFound, {"'_cudaLaunchKernelEy'"}));
  EXPECT_EQ(object, TestObjectBytes());
  ElfObjectSpec none;
  none.symbols = {{none.strings.Add("cc_test_version"), kTextSection}};
  ExpectRefused(BuildElfObject(none), Code::kNotFound, {"'_cudaLaunchKernelEx'"});
}

TEST(RenameUndefinedSymbolTest, ADefinedSymbolIsNotAnImport) {
  std::string object = TestObjectBytes();
  EXPECT_TRUE(IsError(RenameUndefinedSymbol(&object, "cc_test_version",
                                            "cc_test_vers10n"),
                      Code::kNotFound, {"'cc_test_version'"}));
  EXPECT_EQ(object, TestObjectBytes());
}

TEST(RenameUndefinedSymbolTest, NamesMustHaveTheSameLengthAndNoNul) {
  std::string object = TestObjectBytes();
  EXPECT_TRUE(IsError(RenameUndefinedSymbol(&object, kFrom, "cutecall_launch_k"),
                      Code::kInvalidArgument,
                      {"'_cudaLaunchKernelEx' (19 bytes)",
                       "'cutecall_launch_k' (17 bytes)", "same length"}));
  EXPECT_TRUE(IsError(RenameUndefinedSymbol(&object, "", ""),
                      Code::kInvalidArgument, {"empty"}));
  EXPECT_TRUE(IsError(RenameUndefinedSymbol(&object, kFrom,
                                            std::string("cutecall\0launch_kex", 19)),
                      Code::kInvalidArgument, {"NUL"}));
  EXPECT_EQ(object, TestObjectBytes());
}

TEST(RenameUndefinedSymbolTest, ASymbolSharingTheNamesTailIsRefused) {
  ElfObjectSpec spec;
  uint32_t name = spec.strings.Add(kFrom);
  spec.symbols = {{name, 0}, {name + 5, kTextSection}};  // "LaunchKernelEx"
  ExpectRefused(BuildElfObject(spec), Code::kFailedPrecondition,
                {"symbol 2 'LaunchKernelEx'", "string tail merging"});
}

TEST(RenameUndefinedSymbolTest, AnImportThatIsTheTailOfALongerNameIsRefused) {
  ElfObjectSpec spec;
  uint32_t name = spec.strings.Add(std::string("my") + kFrom);
  spec.symbols = {{name, kTextSection}, {name + 2, 0}};
  ExpectRefused(BuildElfObject(spec), Code::kFailedPrecondition,
                {"symbol 1 'my_cudaLaunchKernelEx'"});
}

TEST(RenameUndefinedSymbolTest, ASectionNameSharingTheNameIsRefused) {
  ElfObjectSpec spec;
  uint32_t section = spec.strings.Add(std::string(".text.") + kFrom);
  spec.symbols = {{section + 6, 0}};
  spec.section_names = {spec.strings.Add(".strtab"),
                        spec.strings.Add(".symtab"), section};
  ExpectRefused(BuildElfObject(spec), Code::kFailedPrecondition,
                {"section 3 '.text._cudaLaunchKernelEx'"});
}

TEST(RenameUndefinedSymbolTest, AnExistingSymbolWithTheNewNameIsRefused) {
  ElfObjectSpec spec = DslLikeObject();
  spec.symbols.push_back({spec.strings.Add(kTo), kTextSection});
  ExpectRefused(BuildElfObject(spec), Code::kFailedPrecondition,
                {"symbol 6 is already named 'cutecall_launch_kex'"});
}

TEST(RenameUndefinedSymbolTest, AnUnterminatedNameIsRefused) {
  ElfObjectSpec spec;
  spec.symbols = {{spec.strings.Add(kFrom), 0}};
  spec.shared_section_names = false;  // the import's name ends the table
  std::string object = BuildElfObject(spec);
  uint64_t shoff = 0;
  std::memcpy(&shoff, object.data() + 0x28, 8);
  uint64_t size = 0;  // section 1 (the string table): drop its last NUL
  std::memcpy(&size, object.data() + shoff + 64 + 32, 8);
  --size;
  std::memcpy(&object[shoff + 64 + 32], &size, 8);
  ExpectRefused(object, Code::kFailedPrecondition, {"not NUL-terminated"});
}

// The import's name placed inside the symbol table: st_value and st_size
// of entry 2 and st_name of entry 3, read through a string table that
// spans the whole file.
TEST(RenameUndefinedSymbolTest, ANameInsideTheSymbolTableIsRefused) {
  ElfObjectSpec spec;
  spec.symbols = {{0, 0}, {0, kTextSection}, {0, kTextSection}};
  spec.shared_section_names = false;
  std::string object = BuildElfObject(spec);
  uint64_t shoff = 0, symtab = 0, whole = object.size();
  std::memcpy(&shoff, object.data() + 0x28, 8);
  std::memcpy(&symtab, object.data() + shoff + 2 * 64 + 24, 8);
  std::memcpy(&object[shoff + 64 + 24], "\0\0\0\0\0\0\0\0", 8);
  std::memcpy(&object[shoff + 64 + 32], &whole, 8);
  uint32_t name = uint32_t(symtab + 2 * 24 + 8);
  std::memcpy(&object[name], "_cudaLaunchKernelEx\0", 20);
  std::memcpy(&object[symtab + 24], &name, 4);
  ExpectRefused(object, Code::kFailedPrecondition,
                {"overlap symbol table section 2", "malformed"});
}

TEST(RenameUndefinedSymbolTest, NonElfInputIsInvalidArgument) {
  for (std::string bad : {std::string(), std::string("hello, world"),
                          std::string(4096, '\0')}) {
    ExpectRefused(bad, Code::kInvalidArgument, {"not an ELF object"});
  }
  std::string so = cutecall_test::ReadFile(CUTECALL_TEST_PARTIAL_RUNTIME);
  ExpectRefused(so, Code::kInvalidArgument, {"relocatable"});
}

bool IsExpectedOutcome(const Status& s) {
  return s.ok() || s.code() == Code::kInvalidArgument ||
         s.code() == Code::kNotFound || s.code() == Code::kFailedPrecondition;
}

// A rename of a malformed object: an expected outcome, bytes unchanged on
// an error and only the name changed on success.
void ExpectSafe(const std::string& object, const std::string& what) {
  std::string copy = object;
  Status s = RenameUndefinedSymbol(&copy, kFrom, kTo);
  EXPECT_TRUE(IsExpectedOutcome(s)) << what << ": " << s.ToString();
  if (s.ok()) {
    EXPECT_TRUE(OnlyNamesChanged(object, copy)) << what;
  } else {
    EXPECT_EQ(copy, object) << what << ": " << s.ToString();
  }
}

TEST(RenameUndefinedSymbolTest, TruncationAtAnyOffsetIsSafe) {
  for (const std::string& object :
       {TestObjectBytes(), BuildElfObject(DslLikeObject())}) {
    for (size_t n = 0; n < object.size(); ++n) {
      ExpectSafe(object.substr(0, n), "length " + std::to_string(n));
    }
  }
}

TEST(RenameUndefinedSymbolTest, CorruptHeaderFieldsAreSafe) {
  for (const std::string& object :
       {TestObjectBytes(), BuildElfObject(DslLikeObject())}) {
    uint64_t shoff = 0;
    uint16_t shnum = 0;
    std::memcpy(&shoff, object.data() + 0x28, 8);
    std::memcpy(&shnum, object.data() + 0x3C, 2);
    std::vector<uint64_t> offsets;
    for (uint64_t off = 0; off < 64; off += 8) offsets.push_back(off);
    for (uint64_t off = shoff; off < shoff + uint64_t(shnum) * 64; off += 8) {
      offsets.push_back(off);
    }
    const uint64_t values[] = {0, 1, 24, 0xFFFF, object.size() - 1,
                               object.size(), uint64_t{1} << 63, ~uint64_t{0},
                               ~uint64_t{0} - 23};
    for (uint64_t off : offsets) {
      for (uint64_t v : values) {
        std::string corrupt = object;
        std::memcpy(&corrupt[off], &v, 8);
        ExpectSafe(corrupt, "word at " + std::to_string(off) + " = " +
                                std::to_string(v));
      }
    }
  }
}

}  // namespace
}  // namespace cutecall
