// RenameUndefinedSymbol (elf.h): an import of a relocatable
// object renamed in place, by rewriting its name's bytes in the string
// table. Nothing moves, so every offset in the object stays valid; the
// rename is refused whenever those bytes are not the import's alone.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "elf.h"
#include "elf_symbols.h"

namespace cutecall {
namespace {

// One name to rewrite: where its bytes lie in the object.
struct Target {
  uint64_t file_offset = 0;
};

// off + size, saturated at UINT64_MAX.
uint64_t End(uint64_t off, uint64_t size) {
  return size > UINT64_MAX - off ? UINT64_MAX : off + size;
}

bool Overlaps(uint64_t a, uint64_t a_size, uint64_t b, uint64_t b_size) {
  return a < End(b, b_size) && b < End(a, a_size);
}

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// Every undefined symbol named `from`: NotFound when there is none,
// FailedPrecondition when one is unterminated or a symbol is named `to`.
Status FindTargets(std::string_view b, std::string_view from,
                   std::string_view to, std::vector<Target>* targets) {
  std::string clash;
  bool unterminated = false;
  Status s = elf::ForEachSymbol(b, [&](const elf::Symbol& sym) {
    if (sym.text == to && clash.empty()) {
      clash = "symbol " + std::to_string(sym.index) + " is already named " +
              Quote(to);
    }
    if (sym.shndx != 0 || sym.text != from) return true;
    unterminated = unterminated || !sym.terminated;
    uint64_t file_offset = sym.strtab_offset + sym.name;
    for (const Target& t : *targets) {
      if (t.file_offset == file_offset) return true;  // one name, two entries
    }
    targets->push_back({file_offset});
    return true;
  });
  if (!s.ok()) return s;
  const std::string refused =
      "cannot rename " + Quote(from) + " to " + Quote(to) + ": ";
  if (unterminated) {
    return FailedPrecondition(refused + "its name is not NUL-terminated in "
                              "its string table (a malformed object)");
  }
  if (targets->empty()) {
    return NotFound("module imports no symbol " + Quote(from) +
                    " (no undefined symbol has that name)");
  }
  if (!clash.empty()) return FailedPrecondition(refused + clash);
  return Status::Ok();
}

// What else names bytes of a target, or "" when nothing does: a symbol
// (other than the undefined `from` symbols themselves) or a section name.
// Bytes are compared by file offset, so string tables that overlap in a
// malformed object are caught too.
Status FindSharer(std::string_view b, const std::vector<Target>& targets,
                  uint64_t length, std::string* sharer) {
  auto shares = [&](uint64_t file_offset, uint64_t size) {
    for (const Target& t : targets) {
      if (Overlaps(file_offset, size, t.file_offset, length)) return true;
    }
    return false;
  };
  auto is_target = [&](const elf::Symbol& sym) {
    for (const Target& t : targets) {
      if (sym.shndx == 0 && sym.strtab_offset + sym.name == t.file_offset) {
        return true;
      }
    }
    return false;
  };
  Status s = elf::ForEachSymbol(b, [&](const elf::Symbol& sym) {
    if (sym.text.empty() || is_target(sym)) return true;
    if (shares(sym.strtab_offset + sym.name, sym.text.size())) {
      *sharer = "symbol " + std::to_string(sym.index) + " " + Quote(sym.text);
      return false;
    }
    return true;
  });
  if (!s.ok() || !sharer->empty()) return s;
  elf::Header h;
  if (Status hs = elf::ReadHeader(b, &h); !hs.ok()) return hs;
  elf::Section names;
  if (!elf::ReadStringTable(b, h, h.shstrndx, &names).ok()) {
    return Status::Ok();  // no readable section names: none can share
  }
  std::string_view table = b.substr(names.offset, names.size);
  for (uint32_t i = 0; i < h.shnum; ++i) {
    elf::Section sec;
    if (Status ss = elf::ReadSection(b, h, i, &sec); !ss.ok()) return ss;
    if (sec.name >= table.size()) continue;
    std::string_view text = table.substr(sec.name);
    text = text.substr(0, text.find('\0'));
    if (shares(names.offset + sec.name, text.size())) {
      *sharer = "section " + std::to_string(i) + " " + Quote(text);
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// Which structure the bytes [offset, offset + length) overlap, or "".
Status FindOverlappedStructure(std::string_view b, uint64_t offset,
                               uint64_t length, std::string* what) {
  elf::Header h;
  if (Status s = elf::ReadHeader(b, &h); !s.ok()) return s;
  if (Overlaps(offset, length, 0, elf::kHeaderSize)) {
    *what = "the ELF header";
    return Status::Ok();
  }
  if (Overlaps(offset, length, h.shoff, uint64_t(h.shnum) * h.shentsize)) {
    *what = "the section headers";
    return Status::Ok();
  }
  for (uint32_t i = 0; i < h.shnum; ++i) {
    elf::Section sec;
    if (Status s = elf::ReadSection(b, h, i, &sec); !s.ok()) return s;
    if (sec.type == elf::kSectionSymtab &&
        Overlaps(offset, length, sec.offset, sec.size)) {
      *what = "symbol table section " + std::to_string(i);
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status CheckNames(std::string_view from, std::string_view to) {
  if (from.empty() || to.empty()) {
    return InvalidArgument("cannot rename " + Quote(from) + " to " +
                           Quote(to) + ": a symbol name is empty");
  }
  if (from.find('\0') != std::string_view::npos ||
      to.find('\0') != std::string_view::npos) {
    return InvalidArgument("cannot rename a symbol to or from a name "
                           "holding a NUL byte");
  }
  if (from.size() != to.size()) {
    return InvalidArgument(
        "cannot rename " + Quote(from) + " (" + std::to_string(from.size()) +
        " bytes) to " + Quote(to) + " (" + std::to_string(to.size()) +
        " bytes) in place: the names must have the same length");
  }
  return Status::Ok();
}

}  // namespace

Status RenameUndefinedSymbol(std::string* object, std::string_view from,
                             std::string_view to) {
  if (Status s = CheckNames(from, to); !s.ok()) return s;
  const std::string_view b(*object);
  std::vector<Target> targets;
  if (Status s = FindTargets(b, from, to, &targets); !s.ok()) return s;
  const std::string refused =
      "cannot rename " + Quote(from) + " to " + Quote(to) + " in place: ";
  std::string sharer;
  if (Status s = FindSharer(b, targets, from.size(), &sharer); !s.ok()) {
    return s;
  }
  if (!sharer.empty()) {
    return FailedPrecondition(refused + "its name's bytes are shared with " +
                              sharer + " (string tail merging)");
  }
  for (const Target& t : targets) {
    std::string what;
    Status s = FindOverlappedStructure(b, t.file_offset, from.size(), &what);
    if (!s.ok()) return s;
    if (!what.empty()) {
      return FailedPrecondition(refused + "its name's bytes at offset " +
                                std::to_string(t.file_offset) + " overlap " +
                                what + " (a malformed object)");
    }
  }
  for (const Target& t : targets) {
    std::memcpy(object->data() + t.file_offset, to.data(), to.size());
  }
  return Status::Ok();
}

}  // namespace cutecall
