// Writes the seed corpora of the fuzz targets (cpp/fuzz/corpus/<target>/)
// from plans built with the test helpers (cpp/tests/plan_builder.h): valid
// plans of every version and feature, the manifests and attribute sets that
// carry them, and a few malformed inputs; and ELF objects built with
// cpp/tests/elf_builder.h, renamable or refused for each reason. Valid
// seeds are checked with the parsers before they are written.
//   build/fuzz/bin/cutecall_make_corpus cpp/fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bundle_manifest.h"
#include "elf.h"
#include "cutecall/launch_plan.h"
#include "sha256.h"
#include "elf_builder.h"
#include "plan_builder.h"

namespace {

namespace fs = std::filesystem;
using cutecall::abi::Source;
using cutecall_test::DynamicOperand;
using cutecall_test::Encode;
using cutecall_test::OperandSpec;
using cutecall_test::PlanSpec;

struct Seed {
  std::string name;
  PlanSpec spec;
  std::string operands;  // comma-separated names
  std::string symbols;
};

std::vector<Seed> Plans() {
  std::vector<Seed> out;
  out.push_back({"saxpy_v3", cutecall_test::SaxpySpec(), "x,y,out", ""});

  PlanSpec mat;  // rank 2, aligned, divisible
  mat.num_args = 1;
  mat.num_rets = 1;
  OperandSpec x = DynamicOperand(Source::kArg, 0, 2);
  x.align = 16;
  x.elem_bytes = 2;
  x.dyn_shape = {{0, 1}, {1, 8}};
  OperandSpec y = DynamicOperand(Source::kRet, 0, 2);
  y.static_dims = {{1, 64}};
  y.dyn_shape = {{0, 1}};
  mat.operands = {x, y};
  out.push_back({"mat_static_v3", mat, "x,out", ""});

  PlanSpec strided;  // dynamic and static strides, 64-bit shapes
  strided.num_args = 1;
  strided.num_rets = 1;
  OperandSpec s = DynamicOperand(Source::kArg, 0, 3);
  s.flags = cutecall::abi::kFlagStrided | cutecall::abi::kFlagShape64;
  s.dyn_stride = {{0, 4}};
  s.static_stride = {{1, 128}};
  strided.operands = {s, DynamicOperand(Source::kRet, 0, 3)};
  out.push_back({"strided_wide_v3", strided, "q,out", ""});

  PlanSpec tied;  // symbols: a (M, N) and b (N, M) share their extents
  tied.num_args = 2;
  tied.num_rets = 1;
  tied.num_scalars = 2;
  OperandSpec a = DynamicOperand(Source::kArg, 0, 2);
  a.dyn_symbols = {0, 1};
  OperandSpec b = DynamicOperand(Source::kArg, 1, 2);
  b.dyn_symbols = {1, 0};
  b.dyn_shape = {{0, 4}, {1, 2}};
  OperandSpec c = DynamicOperand(Source::kRet, 0, 1);
  c.dyn_symbols = {0};
  tied.operands = {a, b, c};
  out.push_back({"tied_symbols_v3", tied, "a,b,c", "M,N"});
  tied.version = 2;
  out.push_back({"tied_symbols_v2", tied, "a,b,c", "M,N"});

  PlanSpec v1;  // pairs, no symbols, no scalars
  v1.version = 1;
  v1.num_args = 1;
  v1.num_rets = 1;
  v1.operands = {DynamicOperand(Source::kArg, 0, 2),
                 DynamicOperand(Source::kRet, 0, 2)};
  out.push_back({"plain_v1", v1, "", ""});

  PlanSpec rank8;  // the largest rank, every dim divisible by 2^d
  rank8.num_args = 1;
  OperandSpec r = DynamicOperand(Source::kArg, 0, 8);
  for (int64_t d = 0; d < 8; ++d) r.dyn_shape[size_t(d)].second = 1 << d;
  rank8.operands = {r};
  out.push_back({"rank8_v3", rank8, "t", ""});

  PlanSpec scalars_only;
  scalars_only.num_scalars = 3;
  out.push_back({"scalars_only_v3", scalars_only, "", ""});
  return out;
}

void Write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void AppendValues(std::string* out, const std::vector<int64_t>& values) {
  out->append(reinterpret_cast<const char*>(values.data()), values.size() * 8);
}

// fuzz_launch_plan's input: names, symbols, uint16 count, plan, extents.
std::string PlanInput(const Seed& s, const std::vector<int64_t>& plan,
                      const std::vector<int64_t>& extents = {}) {
  std::string out = s.operands + '\0' + s.symbols + '\0';
  out += char(plan.size() & 0xff);
  out += char(plan.size() >> 8);
  AppendValues(&out, plan);
  AppendValues(&out, extents);
  return out;
}

cutecall::LaunchPlan MustParse(const Seed& s) {
  std::vector<int64_t> plan = Encode(s.spec);
  auto parsed = cutecall::LaunchPlan::Parse(plan.data(), plan.size(), s.name,
                                            s.operands, s.symbols);
  if (!parsed.ok()) {
    std::fprintf(stderr, "seed %s: %s\n", s.name.c_str(),
                 parsed.status().message().c_str());
    std::exit(1);
  }
  return parsed.value();
}

std::string Join(const std::vector<int64_t>& v, const char* sep) {
  std::string out;
  for (int64_t x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

// One manifest entry for seed `s`, layouts row-major (or "-").
std::string Entry(const Seed& s, bool layouts) {
  cutecall::LaunchPlan plan = MustParse(s);
  std::string scalars, layout;
  for (size_t i = 0; i < plan.num_scalars(); ++i) {
    scalars += std::string(i ? "," : "") + (i % 2 ? "?" : "Float32:alpha");
  }
  for (const cutecall::OperandPlan& op : plan.operands()) {
    std::vector<int64_t> dims;
    for (int32_t d = op.rank - 1; d >= 0; --d) dims.push_back(d);
    layout += (layout.empty() ? "" : ";") + Join(dims, ",");
  }
  if (!layouts || plan.operands().empty()) layout = "-";
  std::string hex = cutecall::ToHex(cutecall::Sha256(s.name));
  return "entry " + s.name + "\nkernel " + s.name + "\nkey " + hex +
         "\narch sm_90a\nfunction cutlass_" + s.name + "\nsha256 " + hex +
         "\nsize 4096\nplan-version " + std::to_string(s.spec.version) +
         "\nplan " + Join(Encode(s.spec), " ") + "\noperands " + s.operands +
         "\nsymbols" + (s.symbols.empty() ? "" : " " + s.symbols) +
         "\nnum-slots " + std::to_string(plan.num_slots()) + "\nscalars" +
         (scalars.empty() ? "" : " " + scalars) + "\nlayouts " + layout +
         "\njax {\"in\":1}\nend\n";
}

std::string Seal(const std::string& body) {
  return body + "manifest-sha256 " + cutecall::ToHex(cutecall::Sha256(body)) +
         "\n";
}

// fuzz_xla_attrs's input: flags, then (kind, name, value) records.
std::string Record(int kind, const std::string& name, const std::string& v) {
  std::string out(1, char(kind));
  out += char(name.size());
  out += name;
  out += char(v.size() & 0xff);
  out += char(v.size() >> 8);
  return out + v;
}

std::string AttrsInput(const Seed& s, bool fix_key, bool v1_style) {
  const std::string module = "object bytes of " + s.name;
  std::vector<int64_t> plan = Encode(s.spec), scalars;
  for (int64_t i = 0; i < s.spec.num_scalars; ++i) scalars.push_back(i + 7);
  std::string plan_bytes, scalar_bytes;
  AppendValues(&plan_bytes, plan);
  AppendValues(&scalar_bytes, scalars);
  std::string out(1, char(fix_key ? 1 : 0));
  out += Record(0, "module", module);
  out += Record(0, "key", fix_key ? std::string(64, '0')
                                  : cutecall::ToHex(cutecall::Sha256(module)));
  out += Record(0, "function", "cutlass_" + s.name);
  out += Record(0, "kernel", s.name);
  out += Record(1, "plan", plan_bytes);
  out += Record(0, "operands", s.operands);
  if (!v1_style) {
    out += Record(1, "scalars", scalar_bytes);
    out += Record(0, "symbols", s.symbols);
  }
  return out;
}

// fuzz_elf_symbols's input: objects whose rename succeeds, and one per
// reason it is refused. Each seed's outcome is checked before it is written.
void WriteElfSeeds(const fs::path& dir) {
  using cutecall::Code;
  using cutecall_test::BuildElfObject;
  using cutecall_test::DslLikeObject;
  using cutecall_test::ElfObjectSpec;
  using cutecall_test::kTextSection;
  const std::string from = "_cudaLaunchKernelEx";
  auto write = [&](const std::string& name, const ElfObjectSpec& spec,
                   Code expected) {
    std::string object = BuildElfObject(spec);
    cutecall::Status s =
        cutecall::RenameUndefinedSymbol(&object, from, "cutecall_launch_kex");
    if (s.code() != expected) {
      std::fprintf(stderr, "elf seed %s: %s\n", name.c_str(),
                   s.ToString().c_str());
      std::exit(1);
    }
    Write(dir / name, BuildElfObject(spec));
  };
  write("dsl_like", DslLikeObject(), Code::kOk);
  ElfObjectSpec separate = DslLikeObject();
  separate.shared_section_names = false;
  write("separate_section_names", separate, Code::kOk);
  ElfObjectSpec twice = DslLikeObject();
  twice.symbols.push_back(twice.symbols[1]);
  twice.symbols.push_back({twice.strings.Add(from), 0});
  write("import_twice", twice, Code::kOk);
  ElfObjectSpec none;
  none.symbols = {{none.strings.Add("cc_test_version"), kTextSection}};
  write("no_import", none, Code::kNotFound);
  ElfObjectSpec tail;
  uint32_t name = tail.strings.Add(from);
  tail.symbols = {{name, 0}, {name + 5, kTextSection}};
  write("tail_shared", tail, Code::kFailedPrecondition);
  ElfObjectSpec section;
  uint32_t text = section.strings.Add(".text." + from);
  section.symbols = {{text + 6, 0}};
  section.section_names = {section.strings.Add(".strtab"),
                           section.strings.Add(".symtab"), text};
  write("section_name_shared", section, Code::kFailedPrecondition);
  ElfObjectSpec clash = DslLikeObject();
  clash.symbols.push_back({clash.strings.Add("cutecall_launch_kex"), kTextSection});
  write("new_name_taken", clash, Code::kFailedPrecondition);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* t :
       {"launch_plan", "bundle_manifest", "xla_attrs", "elf_symbols"}) {
    fs::create_directories(root / t);
  }
  WriteElfSeeds(root / "elf_symbols");
  const std::vector<Seed> plans = Plans();
  std::string body = "cutecall-bundle 1\ncutecall 0.1.0\ndsl 4.8.1\n";
  for (const Seed& s : plans) {
    MustParse(s);
    std::vector<int64_t> plan = Encode(s.spec);
    Write(root / "launch_plan" / s.name, PlanInput(s, plan));
    Write(root / "launch_plan" / (s.name + "_odd_extents"),
          PlanInput(s, plan, {0, -1, int64_t{1} << 31, 3, 6, 1, 128, 4}));
    Write(root / "xla_attrs" / s.name, AttrsInput(s, false, s.spec.version == 1));
    Write(root / "xla_attrs" / (s.name + "_fixkey"), AttrsInput(s, true, false));
    Write(root / "bundle_manifest" / s.name,
          Seal("cutecall-bundle 1\ncutecall 0.1.0\ndsl 4.8.1\n" +
               Entry(s, s.spec.version != 1)));
    body += Entry(s, true);
  }
  Write(root / "bundle_manifest" / "all_entries", Seal(body));
  // Format 3: what a kernel read of its device while traced.
  std::string reads = Entry(plans.front(), true);
  reads.insert(reads.rfind("end\n"),
               "device-reads l2_bytes=52428800,max_active_clusters(2)=66,"
               "sm_count=132\n");
  Write(root / "bundle_manifest" / "device_reads_v3",
        Seal("cutecall-bundle 3\ncutecall 0.1.0\ndsl 4.8.1\n" + reads));
  // Malformed: each parser's early exits.
  const Seed& first = plans.front();
  std::vector<int64_t> plan = Encode(first.spec);
  Write(root / "launch_plan" / "truncated_header",
        PlanInput(first, {plan.begin(), plan.begin() + 3}));
  std::vector<int64_t> trailing = plan;
  trailing.push_back(0);
  Write(root / "launch_plan" / "trailing_value", PlanInput(first, trailing));
  plan[0] = 4;
  Write(root / "launch_plan" / "future_version", PlanInput(first, plan));
  Write(root / "bundle_manifest" / "unsealed", body + "manifest-sha256 " +
                                                   std::string(64, 'f') + "\n");
  Write(root / "bundle_manifest" / "entry_without_end",
        Seal("cutecall-bundle 1\ncutecall 0.1.0\ndsl 4.8.1\nentry x\n"));
  Write(root / "xla_attrs" / "empty", std::string(1, '\0'));
  Write(root / "xla_attrs" / "plan_as_int32",
        std::string(1, '\1') + Record(2, "plan", std::string(20, '\0')) +
            Record(0, "module", "m") + Record(0, "key", ""));
  return 0;
}
