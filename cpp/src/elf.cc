// ELF64 symbol tables of module bytes, before the DSL runtime sees them:
// the bounds-checked walker (elf_symbols.h) and CheckElfDefines.
#include <cstdint>
#include <cstring>
#include <string>

#include "elf.h"
#include "elf_symbols.h"

namespace cutecall {
namespace elf {
namespace {

template <typename T>
bool ReadAt(std::string_view b, uint64_t off, T* out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(out, b.data() + off, sizeof(T));
  return true;
}

// File offset of section header `index`; false if it does not fit in 64 bits.
bool SectionHeaderOffset(const Header& h, uint32_t index, uint64_t* off) {
  uint64_t rel = uint64_t(index) * h.shentsize;  // < 2^32: cannot overflow
  if (h.shoff > UINT64_MAX - rel) return false;
  *off = h.shoff + rel;
  return true;
}

}  // namespace

Status ReadHeader(std::string_view b, Header* h) {
  if (b.size() < kHeaderSize || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) {
    return InvalidArgument("module bytes are not an ELF object");
  }
  if (b[4] != 2 || b[5] != 1) {
    return InvalidArgument("module bytes are not a 64-bit little-endian ELF");
  }
  uint16_t type = 0;
  if (!ReadAt(b, 0x10, &type) || type != 1 /* ET_REL */) {
    return InvalidArgument("module bytes are not a relocatable ELF object "
                           "(e_type " + std::to_string(type) + ")");
  }
  if (!ReadAt(b, 0x28, &h->shoff) || !ReadAt(b, 0x3A, &h->shentsize) ||
      !ReadAt(b, 0x3C, &h->shnum) || !ReadAt(b, 0x3E, &h->shstrndx) ||
      h->shentsize < 64) {
    return InvalidArgument("module ELF header is truncated");
  }
  return Status::Ok();
}

Status ReadSection(std::string_view b, const Header& h, uint32_t index,
                   Section* s) {
  uint64_t sh = 0;
  if (index >= h.shnum || !SectionHeaderOffset(h, index, &sh) ||
      !ReadAt(b, sh, &s->name) || !ReadAt(b, sh + 4, &s->type) ||
      !ReadAt(b, sh + 24, &s->offset) || !ReadAt(b, sh + 32, &s->size) ||
      !ReadAt(b, sh + 40, &s->link) || !ReadAt(b, sh + 56, &s->entsize)) {
    return InvalidArgument("module ELF section table is truncated");
  }
  return Status::Ok();
}

Status ReadStringTable(std::string_view b, const Header& h, uint32_t index,
                       Section* s) {
  if (index >= h.shnum || !ReadSection(b, h, index, s).ok() ||
      s->offset > b.size() || b.size() - s->offset < s->size) {
    return InvalidArgument("module ELF string table is truncated");
  }
  return Status::Ok();
}

Status ForEachSymbol(std::string_view b,
                     const std::function<bool(const Symbol&)>& visit) {
  Header h;
  if (Status s = ReadHeader(b, &h); !s.ok()) return s;
  for (uint32_t i = 0; i < h.shnum; ++i) {
    Section table;
    if (Status s = ReadSection(b, h, i, &table); !s.ok()) return s;
    if (table.type != kSectionSymtab || table.entsize < kSymbolSize) continue;
    Section strings;
    if (Status s = ReadStringTable(b, h, table.link, &strings); !s.ok()) {
      return s;
    }
    std::string_view strtab = b.substr(strings.offset, strings.size);
    uint32_t index = 0;
    for (uint64_t e = 0; e <= table.size && table.size - e >= table.entsize;
         e += table.entsize, ++index) {
      Symbol sym;
      if (table.offset > UINT64_MAX - e ||
          !ReadAt(b, table.offset + e, &sym.name) ||
          !ReadAt(b, table.offset + e + 6, &sym.shndx)) {
        return InvalidArgument("module ELF symbol table is truncated");
      }
      sym.index = index;
      sym.strtab = uint16_t(table.link);
      sym.strtab_offset = strings.offset;
      sym.strtab_size = strings.size;
      sym.symtab = uint16_t(i);
      sym.entry_offset = table.offset + e;
      if (sym.name < strtab.size()) {
        std::string_view rest = strtab.substr(sym.name);
        size_t nul = rest.find('\0');
        sym.terminated = nul != std::string_view::npos;
        sym.text = sym.terminated ? rest.substr(0, nul) : rest;
      }
      if (!visit(sym)) return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace elf

Status CheckElfDefines(std::string_view b, std::string_view symbol) {
  bool found = false;
  Status s = elf::ForEachSymbol(b, [&](const elf::Symbol& sym) {
    found = sym.shndx != 0 && sym.text == symbol;  // 0: undefined
    return !found;
  });
  if (!s.ok()) return s;
  if (found) return Status::Ok();
  return NotFound("module defines no symbol '" + std::string(symbol) + "'");
}

Status CheckElfImports(std::string_view b, std::string_view symbol) {
  bool found = false;
  Status s = elf::ForEachSymbol(b, [&](const elf::Symbol& sym) {
    found = sym.shndx == 0 && sym.text == symbol;  // 0: undefined
    return !found;
  });
  if (!s.ok()) return s;
  if (found) return Status::Ok();
  return NotFound("module imports no symbol '" + std::string(symbol) + "'");
}

}  // namespace cutecall
