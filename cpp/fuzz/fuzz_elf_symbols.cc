// Fuzz target: the readers of module bytes that run before the CuTe DSL
// runtime sees them (cpp/src/elf.cc, elf_rename.cc): CheckElfDefines and
// RenameUndefinedSymbol, which module loading uses to route a module's
// _cudaLaunchKernelEx through cutecall_launch_kex.
//
// Input: the bytes of an ELF object (cpp/fuzz/corpus/elf_symbols, written
// by make_corpus.cc from cpp/tests/elf_builder.h; tokens in
// elf_symbols.dict).
// Beyond ASan/UBSan, checks the rename's contract: a refused rename leaves
// the bytes unchanged and says why; an accepted one changes only whole
// windows that held "_cudaLaunchKernelEx" and now hold
// "cutecall_launch_kex", leaves what CheckElfDefines answers unchanged,
// leaves no such import behind (a second rename is NotFound), and renaming
// back, where accepted, restores the input exactly.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "elf.h"

namespace {

using cutecall::Code;
using cutecall::Status;

constexpr std::string_view kFrom = "_cudaLaunchKernelEx";
constexpr std::string_view kTo = "cutecall_launch_kex";

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "ELF contract broken: %s\n", what);
    std::abort();
  }
}

bool OnlyNamesChanged(const std::string& before, const std::string& after) {
  if (before.size() != after.size()) return false;
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i] == after[i]) continue;
    if (i + kFrom.size() > before.size() ||
        before.compare(i, kFrom.size(), kFrom) != 0 ||
        after.compare(i, kTo.size(), kTo) != 0) {
      return false;
    }
    i += kFrom.size() - 1;
  }
  return true;
}

// What CheckElfDefines answers, as a code (the rename must not change it).
Code Defines(std::string_view object, std::string_view symbol) {
  Status s = cutecall::CheckElfDefines(object, symbol);
  Check(s.ok() || !s.message().empty(), "CheckElfDefines: error without a message");
  return s.code();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const Code version = Defines(input, "cc_test_version");
  const Code import = Defines(input, kFrom);

  std::string renamed = input;
  Status s = cutecall::RenameUndefinedSymbol(&renamed, kFrom, kTo);
  if (!s.ok()) {
    Check(!s.message().empty(), "refused without a message");
    Check(s.code() != Code::kInternal, "refused as Internal");
    Check(renamed == input, "a refused rename changed the bytes");
    return 0;
  }
  Check(renamed != input, "an accepted rename changed nothing");
  Check(OnlyNamesChanged(input, renamed), "bytes outside the name changed");
  Check(Defines(renamed, "cc_test_version") == version,
        "the rename changed what the object defines");
  Check(Defines(renamed, kFrom) == import,
        "the rename changed whether the import's name is defined");

  std::string again = renamed;
  Status twice = cutecall::RenameUndefinedSymbol(&again, kFrom, kTo);
  Check(twice.code() == Code::kNotFound, "the import survived its rename");
  Check(again == renamed, "a refused second rename changed the bytes");

  Status back = cutecall::RenameUndefinedSymbol(&again, kTo, kFrom);
  if (back.ok()) Check(again == input, "renaming back did not restore the input");
  return 0;
}
