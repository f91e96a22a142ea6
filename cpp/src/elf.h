// elf.h — reading and patching compiled module bytes (ELF64
// little-endian relocatable objects) before the CuTe DSL runtime sees them.
//
// Contract: every read is bounds-checked; malformed bytes are an
// InvalidArgument, never a crash or an overread (the readers are fuzzed:
// cpp/fuzz/fuzz_elf_symbols.cc). A rename either succeeds or leaves the
// bytes exactly as they were.
#ifndef CUTECALL_SRC_ELF_H_
#define CUTECALL_SRC_ELF_H_

#include <string>
#include <string_view>

#include "cutecall/status.h"

namespace cutecall {

// Checks that `object` is an ELF64 little-endian relocatable object that
// defines `symbol` (InvalidArgument if not ELF, NotFound if undefined).
Status CheckElfDefines(std::string_view object, std::string_view symbol);

// Checks that `object` imports `symbol` (an undefined symbol: st_shndx 0):
// InvalidArgument if not ELF, NotFound if it does not.
Status CheckElfImports(std::string_view object, std::string_view symbol);

// Renames the undefined symbol `from` (an import, st_shndx 0) of `object`
// to `to` by rewriting its name in place in the string table, so nothing
// else in the object moves. `to` must be as long as `from`; neither may be
// empty or hold a NUL (InvalidArgument). NotFound when no undefined symbol
// is named `from`. FailedPrecondition, naming the obstacle, when the name's
// bytes cannot be rewritten alone: another symbol's or a section's name
// shares them (string tail merging), a symbol is already named `to`, or the
// bytes overlap the ELF header, the section headers or a symbol table.
// Every undefined symbol named `from` is renamed. On any error `object` is
// unchanged.
Status RenameUndefinedSymbol(std::string* object, std::string_view from,
                             std::string_view to);

}  // namespace cutecall

#endif  // CUTECALL_SRC_ELF_H_
