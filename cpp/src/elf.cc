// ELF64 symbol lookup for module bytes, before the DSL runtime sees them.
#include <cstdint>
#include <cstring>
#include <string>

#include "cutecall/module_registry.h"

namespace cutecall {
namespace {

template <typename T>
bool ReadAt(std::string_view b, uint64_t off, T* out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(out, b.data() + off, sizeof(T));
  return true;
}

}  // namespace

Status CheckElfDefines(std::string_view b, std::string_view symbol) {
  if (b.size() < 64 || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) {
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
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  if (!ReadAt(b, 0x28, &shoff) || !ReadAt(b, 0x3A, &shentsize) ||
      !ReadAt(b, 0x3C, &shnum) || shentsize < 64) {
    return InvalidArgument("module ELF header is truncated");
  }
  for (uint16_t i = 0; i < shnum; ++i) {
    uint64_t sh = shoff + uint64_t(i) * shentsize;
    uint32_t type = 0, link = 0;
    uint64_t off = 0, size = 0, entsize = 0;
    if (!ReadAt(b, sh + 4, &type) || !ReadAt(b, sh + 24, &off) ||
        !ReadAt(b, sh + 32, &size) || !ReadAt(b, sh + 40, &link) ||
        !ReadAt(b, sh + 56, &entsize)) {
      return InvalidArgument("module ELF section table is truncated");
    }
    if (type != 2 /* SHT_SYMTAB */ || entsize < 24) continue;
    uint64_t str_sh = shoff + uint64_t(link) * shentsize;
    uint64_t str_off = 0, str_size = 0;
    if (link >= shnum || !ReadAt(b, str_sh + 24, &str_off) ||
        !ReadAt(b, str_sh + 32, &str_size) || str_off > b.size() ||
        b.size() - str_off < str_size) {
      return InvalidArgument("module ELF string table is truncated");
    }
    std::string_view strtab = b.substr(str_off, str_size);
    for (uint64_t s = 0; s + entsize <= size; s += entsize) {
      uint32_t name = 0;
      uint16_t shndx = 0;
      if (!ReadAt(b, off + s, &name) || !ReadAt(b, off + s + 6, &shndx)) {
        return InvalidArgument("module ELF symbol table is truncated");
      }
      if (shndx == 0 || name >= strtab.size()) continue;  // undefined
      std::string_view n = strtab.substr(name);
      n = n.substr(0, n.find('\0'));
      if (n == symbol) return Status::Ok();
    }
  }
  return NotFound("module defines no symbol '" + std::string(symbol) + "'");
}

}  // namespace cutecall
