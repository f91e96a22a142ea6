// _core: the nanobind module. Bindings only: handler capsules, the state
// type, and the few core functions Python needs. No logic lives here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "cutecall/abi.h"
#include "cutecall/call_state.h"
#include "cutecall/launch_blocking.h"
#include "cutecall/launch_plan.h"
#include "cutecall/module_registry.h"
#include "cutecall/runtime_table.h"
#include "cutecall/sha256.h"
#include "cutecall/xla_ffi.h"
#include "raise.h"
#include "tensor_launcher.h"

namespace nb = nanobind;

namespace {

nb::capsule Capsule(void* fn) { return nb::capsule(fn); }

nb::dict Stages(XLA_FFI_Handler* execute) {
  namespace x = cutecall::xla_ffi;
  nb::dict d;
  d["instantiate"] = Capsule(reinterpret_cast<void*>(x::InstantiateHandler()));
  d["execute"] = Capsule(reinterpret_cast<void*>(execute));
  return d;
}

}  // namespace

NB_MODULE(_core, m) {
  namespace x = cutecall::xla_ffi;
  m.attr("TARGET") = x::kTarget;
  m.attr("TARGET_NO_GRAPH") = x::kTargetNoGraph;
  m.attr("STATE_TYPE") = x::kStateType;
  m.attr("PLAN_VERSION") = cutecall::abi::kPlanVersion;
  m.attr("MAX_SLOTS") = cutecall::abi::kMaxSlots;

  m.def("handlers", [] {
    nb::dict d;
    d[x::kTarget] = Stages(x::ExecuteHandler());
    d[x::kTargetNoGraph] = Stages(x::ExecuteNoGraphHandler());
    return d;
  }, "Handler capsules per target, for jax.ffi.register_ffi_target.");

  m.def("state_type", [] {
    nb::dict d;
    d["type_id"] = Capsule(reinterpret_cast<void*>(x::StateTypeId()));
    d["type_info"] = Capsule(
        const_cast<void*>(reinterpret_cast<const void*>(x::StateTypeInfo())));
    return d;
  }, "The FFI state type registration, for jax.ffi.register_ffi_type.");

  m.def("sha256", [](nb::bytes data) {
    return cutecall::ToHex(cutecall::Sha256(
        std::string_view(static_cast<const char*>(data.data()), data.size())));
  }, nb::arg("data"), "Hex SHA-256 of bytes (the C++ core's digest).");

  m.def("set_runtime_path", &cutecall::SetRuntimeLibraryPath, nb::arg("path"),
        "Path of libcute_dsl_runtime.so used on first load.");
  m.def("runtime_path", &cutecall::RuntimeLibraryPath);
  m.def("runtime_loaded", &cutecall::RuntimeLoaded);
  m.def("set_launch_blocking", &cutecall::SetLaunchBlocking, nb::arg("on"),
        "Every launch synchronizes its stream (CUTECALL_LAUNCH_BLOCKING).");
  m.def("launch_blocking", &cutecall::LaunchBlocking);

  m.def("check_plan", [](const std::vector<int64_t>& plan,
                         const std::string& name,
                         const std::string& operand_names,
                         const std::string& symbol_names) {
    auto parsed = cutecall::LaunchPlan::Parse(plan.data(), plan.size(), name,
                                              operand_names, symbol_names);
    if (!parsed.ok()) cutecall::py::Raise(parsed.status());
    return parsed->num_slots();
  }, nb::arg("plan"), nb::arg("name"), nb::arg("operand_names") = "",
     nb::arg("symbol_names") = "",
     "Validates an encoded launch plan (version 1 or 2); returns its number "
     "of ABI slots, scalar slots included.");

  m.def("check_object", [](nb::bytes data, const std::string& prefix) {
    cutecall::Status s = cutecall::CheckElfDefines(
        std::string_view(static_cast<const char*>(data.data()), data.size()),
        prefix + "_version");
    if (!s.ok()) cutecall::py::Raise(s);
  }, nb::arg("data"), nb::arg("prefix"),
     "Raises unless the object defines the CuTe DSL function `prefix`.");

  m.def("registry_stats", [] {
    auto& r = cutecall::ModuleRegistry::Global();
    nb::dict d;
    d["live_modules"] = r.live_modules();
    d["total_loads"] = r.total_loads();
    return d;
  });

  m.def("call_stats", [] {
    cutecall::CallStats s = cutecall::ReadCallStats();
    nb::dict d;
    d["instantiates"] = s.instantiates;
    d["prepares"] = s.prepares;
    d["executes"] = s.executes;
    return d;
  }, "How often the custom call's stages ran in this process, all call "
     "sites together.");
  m.def("reset_call_stats", &cutecall::ResetCallStats,
        "Sets every call_stats counter to 0.");

  cutecall::py::BindTensorLauncher(m);
  // Launchers live as long as the Python objects that own them, which may
  // be alive at interpreter exit (e.g. referenced from torch's op registry).
  nb::set_leak_warnings(false);
}
