// The DSL launcher's own floor: the kernel's compiled host launcher called
// straight through the runtime's CuteDSLRT_Function_Run, with slots packed
// once, outside the loop. Run minus this is what cutecall adds per launch;
// this minus cuLaunchKernel is the launcher's (and cudaLaunchKernelEx's).
// It loads its own module from the bundle's object (the manifest's entry:
// its 'function' and 'sha256'), through the runtime the bundle loaded.
#include "dsl_floor.h"

#include <fstream>
#include <iterator>
#include <string>

#include "cutecall/runtime_table.h"
#include "timing.h"

namespace bench {
namespace {

// The 'function' and 'sha256' fields of entry `name` in manifest.txt.
bool EntryFields(const std::string& bundle, const std::string& name,
                 std::string* function, std::string* sha256) {
  std::ifstream in(bundle + "/manifest.txt");
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "entry " + name) inside = true;
    if (!inside) continue;
    if (line.rfind("function ", 0) == 0) *function = line.substr(9);
    if (line.rfind("sha256 ", 0) == 0) *sha256 = line.substr(7);
    if (line == "end") break;
  }
  return !function->empty() && !sha256->empty();
}

}  // namespace

double DslFloorUs(const std::string& bundle, const cutecall::BundleKernel& k,
                  cudaStream_t stream, cutecall::Span<cutecall::BufferView> in,
                  cutecall::Span<cutecall::BufferView> out, int iters,
                  int trials, std::string* why) {
  std::string function, sha256;
  if (!EntryFields(bundle, k.name(), &function, &sha256)) {
    *why = "entry '" + k.name() + "' not found in the manifest";
    return -1;
  }
  std::ifstream f(bundle + "/objects/" + sha256 + ".o", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  auto rt = cutecall::Runtime();
  if (!rt.ok() || bytes.empty()) {
    *why = rt.ok() ? "cannot read the object" : rt.status().message();
    return -1;
  }
  const cutecall::RuntimeTable& t = *rt.value();
  void* module = nullptr;
  void* fn = nullptr;
  if (t.module_create_from_bytes(&module, reinterpret_cast<const unsigned char*>(bytes.data()),
                                 bytes.size(), nullptr, 0) != 0 ||
      t.module_get_function(&fn, module, function.c_str()) != 0) {
    *why = "the runtime could not load the object";
    return -1;
  }
  const cutecall::LaunchPlan& plan = k.plan();
  cutecall::abi::Slot slots[cutecall::abi::kMaxSlots];
  for (size_t i = 0; i < plan.operands().size(); ++i) {
    const cutecall::OperandPlan& op = plan.operands()[i];
    const cutecall::BufferView& b =
        op.source == cutecall::abi::Source::kArg ? in[size_t(op.index)] : out[size_t(op.index)];
    if (!plan.PackOperand(i, b, slots).ok()) {
      *why = "operand " + std::to_string(i) + " does not pack";
      return -1;
    }
  }
  void* packed[cutecall::abi::kMaxSlots + 2];
  int32_t status = 0;
  void* s = stream;
  packed[0] = &s;
  for (size_t i = 0; i < plan.num_slots(); ++i) packed[i + 1] = &slots[i];
  packed[plan.num_slots() + 1] = &status;
  const size_t n = plan.num_slots() + 2;
  const double us = BestUs([&] { (void)t.function_run(fn, packed, n); }, stream, iters, trials);
  if (status != 0) {
    *why = "the launch failed: CUDA error " + std::to_string(status);
    return -1;
  }
  cudaStreamSynchronize(stream);
  t.module_destroy(module);
  return us;
}

}  // namespace bench
