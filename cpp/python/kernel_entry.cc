// kernel_entry.cc — `_core.KernelEntry`, `_core.ArgUse` and the shared codes
// as Python types (kernel_entry.h).
#include "kernel_entry.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string_view>
#include <utility>

#include "elf.h"
#include "cutecall/launch_plan.h"
#include "raise.h"

namespace nb = nanobind;

namespace cutecall::py {

KernelEntry::KernelEntry(nb::bytes module, std::string sha256,
                         std::string function, std::string kernel,
                         std::vector<int64_t> plan, std::string operand_names,
                         std::string symbol_names, std::vector<ArgUse> uses,
                         std::vector<uint16_t> static_masks)
    : module_(std::move(module)),
      sha256_(std::move(sha256)),
      function_(std::move(function)),
      kernel_(std::move(kernel)),
      plan_(std::move(plan)),
      operand_names_(std::move(operand_names)),
      symbol_names_(std::move(symbol_names)),
      uses_(std::move(uses)),
      static_masks_(std::move(static_masks)) {
  ErrorOr<LaunchPlan> parsed = LaunchPlan::Parse(
      plan_.data(), plan_.size(), kernel_, operand_names_, symbol_names_);
  if (!parsed.ok()) Raise(parsed.status());
  parsed_ = std::move(parsed).value();
  num_slots_ = parsed_.num_slots();
  zeros_.assign(parsed_.num_scalars(), 0);
}

KernelEntry KernelEntry::WithUses(std::vector<ArgUse> uses,
                                  std::vector<uint16_t> static_masks) const {
  KernelEntry out(*this);
  out.uses_ = std::move(uses);
  out.static_masks_ = std::move(static_masks);
  return out;
}

CallAttributes KernelEntry::Attributes() const {
  CallAttributes a;
  a.module = std::string_view(static_cast<const char*>(module_.data()),
                              module_.size());
  a.key = sha256_;
  a.function = function_;
  a.kernel = kernel_;
  a.plan = plan_.data();
  a.plan_size = plan_.size();
  a.operand_names = operand_names_;
  a.symbol_names = symbol_names_;
  a.scalars = zeros_.data();
  a.num_scalars = zeros_.size();
  return a;
}

void BindKernelEntry(nb::module_& m) {
  nb::enum_<UseKind>(m, "UseKind",
                     "How a launch object's call argument reaches the kernel.",
                     nb::is_arithmetic())
      .value("TENSOR", UseKind::kTensor)
      .value("SCALAR", UseKind::kScalar)
      .value("IGNORE", UseKind::kIgnore)
      .value("OUTPUT", UseKind::kOutput)
      .value("CONST", UseKind::kConst);
  nb::enum_<abi::ScalarType> scalar(m, "ScalarType",
                                    "Runtime scalar types, by ABI code.",
                                    nb::is_arithmetic());
  nb::list names;
  for (int32_t i = 0; i < abi::kNumScalarTypes; ++i) {
    scalar.value(abi::kScalarTypeNames[i], abi::ScalarType(i));
    names.append(abi::kScalarTypeNames[i]);
  }
  m.attr("SCALAR_TYPES") = nb::tuple(names);

  nb::class_<ArgUse>(m, "ArgUse",
                     "How one leaf of a call fills the plan: kind, index (the "
                     "operand or scalar slot), scalar_type (scalars) and value "
                     "(compile-time values: a call matches only if equal).")
      .def(nb::init<>())
      .def("__init__",
           [](ArgUse* u, UseKind kind, int32_t index, abi::ScalarType type,
              nb::object value) {
             new (u) ArgUse{kind, index, type, std::move(value)};
           },
           nb::arg("kind"), nb::arg("index") = 0,
           nb::arg("scalar_type") = abi::ScalarType::kBoolean,
           nb::arg("value") = nb::none())
      .def_ro("kind", &ArgUse::kind)
      .def_ro("index", &ArgUse::index)
      .def_ro("scalar_type", &ArgUse::scalar_type)
      .def_ro("value", &ArgUse::value)
      .def("__repr__", [](const ArgUse& u) {
        return "ArgUse(" + std::to_string(int(u.kind)) + ", " +
               std::to_string(u.index) + ", " +
               abi::kScalarTypeNames[int(u.scalar_type)] + ")";
      });

  nb::class_<KernelEntry>(
      m, "KernelEntry",
      "A compiled kernel as C++ receives it from the compile driver; the "
      "plan is validated when it is built (ValueError naming the kernel). "
      "static_masks: per call leaf, the extents (bit d) and strides (bit "
      "STATIC_STRIDE_SHIFT + d) compiled in; a launcher matches the entry "
      "only for calls with those values.")
      .def(nb::init<nb::bytes, std::string, std::string, std::string,
                    std::vector<int64_t>, std::string, std::string,
                    std::vector<ArgUse>, std::vector<uint16_t>>(),
           nb::kw_only(), nb::arg("module"), nb::arg("sha256"),
           nb::arg("function"), nb::arg("kernel"), nb::arg("plan"),
           nb::arg("operand_names") = "", nb::arg("symbol_names") = "",
           nb::arg("uses") = std::vector<ArgUse>(),
           nb::arg("static_masks") = std::vector<uint16_t>())
      .def_prop_ro("module", &KernelEntry::module)
      .def_prop_ro("sha256", &KernelEntry::sha256)
      .def_prop_ro("function", &KernelEntry::function)
      .def_prop_ro("kernel", &KernelEntry::kernel)
      .def_prop_ro("plan", &KernelEntry::plan)
      .def_prop_ro("operand_names", &KernelEntry::operand_names)
      .def_prop_ro("symbol_names", &KernelEntry::symbol_names)
      .def_prop_ro("uses", &KernelEntry::uses)
      .def_prop_ro("static_masks", &KernelEntry::static_masks)
      .def_prop_ro("num_slots", &KernelEntry::num_slots)
      .def_prop_ro("num_scalars", &KernelEntry::num_scalars)
      .def("with_uses", &KernelEntry::WithUses, nb::kw_only(),
           nb::arg("uses"), nb::arg("static_masks") = std::vector<uint16_t>(),
           "This entry with a launch object's uses and static masks; the "
           "plan parsed when this entry was built is shared, not parsed "
           "again.")
      .def("__repr__", [](const KernelEntry& e) {
        return "KernelEntry(" + e.kernel() + ", sha256=" +
               e.sha256().substr(0, 12) + ", " +
               std::to_string(e.num_slots()) + " slots)";
      });

  m.def("check_object", [](nb::bytes data, const std::string& prefix) {
    Status s = CheckElfDefines(
        std::string_view(static_cast<const char*>(data.data()), data.size()),
        prefix + "_version");
    if (!s.ok()) Raise(s);
  }, nb::arg("data"), nb::arg("prefix"),
     "Raises unless the object defines the CuTe DSL function `prefix`.");
}

}  // namespace cutecall::py
