// elf_symbols.h — reading the sections and symbols of an ELF64
// little-endian relocatable object, bounds-checked (internal to the core).
//
// Shared by CheckElfDefines (elf.cc) and RenameUndefinedSymbol
// (elf_rename.cc), the two readers of module bytes before the CuTe DSL
// runtime sees them. Every read is checked against the bytes' size, so a
// truncated or corrupt object is an InvalidArgument, never an overread.
#ifndef CUTECALL_SRC_ELF_SYMBOLS_H_
#define CUTECALL_SRC_ELF_SYMBOLS_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "cutecall/status.h"

namespace cutecall::elf {

inline constexpr uint32_t kSectionSymtab = 2;  // SHT_SYMTAB
inline constexpr uint64_t kHeaderSize = 64;    // sizeof(Elf64_Ehdr)
inline constexpr uint64_t kSymbolSize = 24;    // sizeof(Elf64_Sym)

// The fields of the ELF header that locate the section headers.
struct Header {
  uint64_t shoff = 0;       // file offset of the section header table
  uint16_t shentsize = 0;   // bytes per section header (>= 64)
  uint16_t shnum = 0;       // number of section headers
  uint16_t shstrndx = 0;    // section holding the section names
};

// One section header.
struct Section {
  uint32_t name = 0;     // sh_name: offset into section `shstrndx`
  uint32_t type = 0;     // sh_type
  uint64_t offset = 0;   // sh_offset
  uint64_t size = 0;     // sh_size
  uint32_t link = 0;     // sh_link (a symbol table's string table)
  uint64_t entsize = 0;  // sh_entsize
};

// One symbol table entry, with its name located in the file.
struct Symbol {
  uint32_t index = 0;        // entry number in its symbol table
  uint32_t name = 0;         // st_name: offset into its string table
  uint16_t shndx = 0;        // st_shndx: 0 for an undefined symbol
  uint16_t strtab = 0;       // section index of its string table
  uint64_t strtab_offset = 0;  // file offset of that string table
  uint64_t strtab_size = 0;    // its size in bytes
  // The name: from st_name up to its NUL, or to the table's end when it
  // has none (then `terminated` is false). Empty, and not terminated, when
  // st_name lies outside the string table.
  std::string_view text;
  bool terminated = false;
  // The symbol table section and the file offset of this entry.
  uint16_t symtab = 0;
  uint64_t entry_offset = 0;
};

// Checks the identity (ELF64, little-endian, ET_REL) and reads the header.
Status ReadHeader(std::string_view object, Header* header);

// Reads section header `index` (< header.shnum).
Status ReadSection(std::string_view object, const Header& header,
                   uint32_t index, Section* section);

// Reads section `index` as a string table: its bytes lie inside `object`.
Status ReadStringTable(std::string_view object, const Header& header,
                       uint32_t index, Section* section);

// Calls visit(symbol) for every entry of every SHT_SYMTAB section, in file
// order, until visit returns false. Fails on the first malformed header,
// section, string table or entry it reaches (entries already visited stay
// visited).
Status ForEachSymbol(std::string_view object,
                     const std::function<bool(const Symbol&)>& visit);

}  // namespace cutecall::elf

#endif  // CUTECALL_SRC_ELF_SYMBOLS_H_
