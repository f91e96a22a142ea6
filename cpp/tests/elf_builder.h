// Hand-built ELF64 little-endian relocatable objects for the ELF tests and
// the fuzz seeds (cpp/fuzz/make_corpus.cc): a string table, a symbol table
// and a .text section, with every string offset under the test's control,
// so that names can share bytes (string tail merging) on purpose.
//
// Layout: ELF header | string table | [section name table] | symbol table
// | section headers: 0 null, 1 string table, 2 .symtab (linked to 1),
// 3 .text (empty), and 4 a separate section name table when the section
// names are not shared. LLVM, which writes CuTe DSL objects, shares one
// string table between section and symbol names; gcc does not.
#ifndef CUTECALL_TESTS_ELF_BUILDER_H_
#define CUTECALL_TESTS_ELF_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace cutecall_test {

// NUL-separated names; offset 0 is the empty name.
class StringTable {
 public:
  // Appends `s` and its NUL; returns its offset.
  uint32_t Add(std::string_view s) {
    uint32_t off = uint32_t(bytes_.size());
    bytes_.append(s.data(), s.size());
    bytes_ += '\0';
    return off;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_ = std::string(1, '\0');
};

inline constexpr uint16_t kTextSection = 3;  // a defined symbol's st_shndx

struct ElfSymbolSpec {
  uint32_t name = 0;   // offset into the string table
  uint16_t shndx = 0;  // 0: undefined; kTextSection: defined
};

struct ElfObjectSpec {
  StringTable strings;
  std::vector<ElfSymbolSpec> symbols;  // after the null symbol
  // The names of sections 1, 2, 3 as offsets into `strings` (shared) or
  // into a separate table of their own; empty: ".strtab", ".symtab",
  // ".text", added by the builder.
  std::vector<uint32_t> section_names;
  bool shared_section_names = true;
};

namespace elf_builder_internal {

template <typename T>
void Put(std::string* out, size_t off, T v) {
  std::memcpy(out->data() + off, &v, sizeof(T));
}

inline void Pad8(std::string* out) { out->resize((out->size() + 7) & ~size_t{7}); }

// Section header `i` at `shoff`.
inline void Section(std::string* out, uint64_t shoff, int i, uint32_t name,
                    uint32_t type, uint64_t off, uint64_t size, uint32_t link,
                    uint32_t info, uint64_t entsize) {
  size_t sh = shoff + uint64_t(i) * 64;
  Put(out, sh, name);
  Put(out, sh + 4, type);
  Put(out, sh + 24, off);
  Put(out, sh + 32, size);
  Put(out, sh + 40, link);
  Put(out, sh + 44, info);
  Put(out, sh + 48, uint64_t{1});  // sh_addralign
  Put(out, sh + 56, entsize);
}

}  // namespace elf_builder_internal

inline std::string BuildElfObject(ElfObjectSpec spec) {
  using namespace elf_builder_internal;
  StringTable own_names;
  StringTable& names = spec.shared_section_names ? spec.strings : own_names;
  if (spec.section_names.empty()) {
    spec.section_names = {names.Add(".strtab"), names.Add(".symtab"),
                          names.Add(".text")};
  }
  spec.section_names.resize(3);
  const uint32_t shstrtab_name =
      spec.shared_section_names ? 0 : own_names.Add(".shstrtab");

  std::string out(64, '\0');
  const uint64_t strtab_off = out.size();
  out += spec.strings.bytes();
  const uint64_t names_off = out.size();
  if (!spec.shared_section_names) out += own_names.bytes();
  Pad8(&out);
  const uint64_t symtab_off = out.size();
  out.resize(out.size() + 24 * (spec.symbols.size() + 1));
  for (size_t i = 0; i < spec.symbols.size(); ++i) {
    size_t e = symtab_off + 24 * (i + 1);
    Put(&out, e, spec.symbols[i].name);
    Put(&out, e + 4, uint8_t{0x10});  // STB_GLOBAL, STT_NOTYPE
    Put(&out, e + 6, spec.symbols[i].shndx);
  }
  const uint64_t shoff = out.size();
  const int shnum = spec.shared_section_names ? 4 : 5;
  out.resize(out.size() + 64 * shnum);

  std::memcpy(out.data(), "\x7f" "ELF", 4);
  out[4] = 2;  // ELFCLASS64
  out[5] = 1;  // ELFDATA2LSB
  out[6] = 1;  // EV_CURRENT
  Put(&out, 0x10, uint16_t{1});   // ET_REL
  Put(&out, 0x12, uint16_t{62});  // EM_X86_64
  Put(&out, 0x14, uint32_t{1});
  Put(&out, 0x28, shoff);
  Put(&out, 0x34, uint16_t{64});  // e_ehsize
  Put(&out, 0x3A, uint16_t{64});  // e_shentsize
  Put(&out, 0x3C, uint16_t(shnum));
  Put(&out, 0x3E, uint16_t(spec.shared_section_names ? 1 : 4));

  Section(&out, shoff, 1, spec.section_names[0], 3 /* SHT_STRTAB */,
          strtab_off, spec.strings.bytes().size(), 0, 0, 0);
  Section(&out, shoff, 2, spec.section_names[1], 2 /* SHT_SYMTAB */,
          symtab_off, 24 * (spec.symbols.size() + 1), 1, 1, 24);
  Section(&out, shoff, 3, spec.section_names[2], 1 /* SHT_PROGBITS */,
          symtab_off, 0, 0, 0, 0);
  if (!spec.shared_section_names) {
    Section(&out, shoff, 4, shstrtab_name, 3, names_off,
            own_names.bytes().size(), 0, 0, 0);
  }
  return out;
}

// Like a CuTe DSL module (one string table for everything, as LLVM writes
// it): defines `prefix`_version and `prefix`_cuda_init, imports
// _cudaLibraryLoadData and _cudaLaunchKernelEx.
inline ElfObjectSpec DslLikeObject(const std::string& prefix = "cc_test") {
  ElfObjectSpec spec;
  StringTable& s = spec.strings;
  spec.symbols = {{s.Add("kernels_binary"), kTextSection},
                  {s.Add("_cudaLaunchKernelEx"), 0},
                  {s.Add(prefix + "_version"), kTextSection},
                  {s.Add("_cudaLibraryLoadData"), 0},
                  {s.Add(prefix + "_cuda_init"), kTextSection}};
  return spec;
}

}  // namespace cutecall_test

#endif  // CUTECALL_TESTS_ELF_BUILDER_H_
