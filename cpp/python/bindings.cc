// _core: the nanobind module. Bindings only: handler capsules, the state
// type, the codes and types Python shares with C++ (kernel_entry.h,
// bundle_binding.h, LayoutProps) and the few core functions Python needs.
// No logic lives here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "cutecall/abi.h"
#include "call_state.h"
#include "device_context.h"
#include "launch_blocking.h"
#include "cutecall/launch_plan.h"
#include "module_registry.h"
#include "cutecall/runtime_table.h"
#include "sha256.h"
#include "xla_ffi.h"
#include "kernel_entry.h"
#include "bundle_binding.h"
#include "eager_call.h"
#include "raise.h"
#include "tensor_launcher.h"

namespace nb = nanobind;

namespace {

nb::capsule Capsule(void* fn) { return nb::capsule(fn); }

// log2 of a divisibility class (a power of two below 2**63).
uint8_t Log2(int64_t c) {
  if (c < 1 || c > (int64_t(1) << 62) || (c & (c - 1))) {
    throw nb::value_error("cutecall: LayoutProps: a class must be a power of two");
  }
  return uint8_t(__builtin_ctzll(uint64_t(c)));
}

nb::tuple Classes(const uint8_t* log2, int32_t rank) {
  nb::list out;
  for (int32_t d = 0; d < rank; ++d) out.append(int64_t(1) << log2[d]);
  return nb::tuple(out);
}

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
  m.attr("MAX_RANK") = cutecall::abi::kMaxRank;
  m.attr("STATIC_STRIDE_SHIFT") = cutecall::py::kStaticStrideShift;

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
  m.def("device_arch", [](int ordinal) -> nb::object {
    auto d = cutecall::Driver();
    if (!d.ok()) return nb::none();
    auto arch = cutecall::DeviceArch(*d.value(), ordinal);
    if (!arch.ok()) return nb::none();
    return nb::str(arch.value().c_str());
  }, nb::arg("ordinal") = 0,
     "The arch cutecall compiles for on CUDA device `ordinal` (\"sm_90a\" on "
     "an H100), read from the driver; None without a driver or device.");
  m.def("device_props", [](int ordinal) -> nb::object {
    auto d = cutecall::Driver();
    if (!d.ok()) return nb::none();
    auto a = cutecall::ReadDeviceAttributes(*d.value(), ordinal);
    if (!a.ok()) return nb::none();
    nb::dict out;
    out["sm_count"] = a.value().sm_count;
    out["smem_per_block_optin"] = a.value().smem_per_block_optin;
    out["smem_per_sm"] = a.value().smem_per_sm;
    out["l2_bytes"] = a.value().l2_bytes;
    out["capability"] = nb::make_tuple(a.value().major, a.value().minor);
    return out;
  }, nb::arg("ordinal") = 0,
     "What kernels read of CUDA device `ordinal` (SM count, shared memory per "
     "block opt-in and per SM, L2 bytes, compute capability), from the "
     "driver; None without a driver or device.");
  m.def("driver_cuda_version", []() -> nb::object {
    auto d = cutecall::Driver();
    int version = 0;
    if (!d.ok() || d.value()->driver_get_version(&version) != 0) return nb::none();
    return nb::int_(version);
  }, "The CUDA version the driver supports (13000 for 13.0); None without "
     "a driver.");
  m.def("set_launch_blocking", &cutecall::SetLaunchBlocking, nb::arg("on"),
        "Every launch synchronizes its stream (CUTECALL_LAUNCH_BLOCKING).");
  m.def("launch_blocking", &cutecall::LaunchBlocking);

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

  namespace py = cutecall::py;
  nb::class_<py::LayoutProps>(
      m, "LayoutProps",
      "What a launch object's specialization depends on in one tensor "
      "(tensor_signature.h): the unit-stride dim (-1: none), the pointer's "
      "alignment in bytes, whether an extent needs 64 bits, and the "
      "divisibility class of every extent and stride.")
      .def("__init__",
           [](py::LayoutProps* p, int unit_dim, int align, bool wide,
              const std::vector<int64_t>& extent_classes,
              const std::vector<int64_t>& stride_classes) {
             new (p) py::LayoutProps();
             const size_t rank = extent_classes.size();
             if (rank == 0 || rank > size_t(cutecall::abi::kMaxRank) ||
                 stride_classes.size() != rank || unit_dim < -1 ||
                 unit_dim >= int(rank) || align < 1 || (align & (align - 1))) {
               throw nb::value_error("cutecall: LayoutProps: bad rank, unit_dim or align");
             }
             p->unit_dim = unit_dim;
             p->align = align;
             p->wide = wide;
             p->rank = int32_t(rank);
             for (size_t d = 0; d < rank; ++d) {
               p->extent_log2[d] = Log2(extent_classes[d]);
               p->stride_log2[d] = Log2(stride_classes[d]);
             }
           },
           nb::kw_only(), nb::arg("unit_dim"), nb::arg("align"), nb::arg("wide"),
           nb::arg("extent_classes"), nb::arg("stride_classes"))
      .def_ro("unit_dim", &py::LayoutProps::unit_dim)
      .def_ro("align", &py::LayoutProps::align)
      .def_ro("wide", &py::LayoutProps::wide)
      .def_ro("overlap", &py::LayoutProps::overlap)
      .def_ro("rank", &py::LayoutProps::rank)
      .def_prop_ro("extent_classes", [](const py::LayoutProps& p) {
        return Classes(p.extent_log2, p.rank);
      })
      .def_prop_ro("stride_classes", [](const py::LayoutProps& p) {
        return Classes(p.stride_log2, p.rank);
      })
      .def("__repr__", [](const py::LayoutProps& p) {
        return "LayoutProps(unit_dim=" + std::to_string(p.unit_dim) +
               ", align=" + std::to_string(p.align) +
               ", wide=" + (p.wide ? "True" : "False") + ", rank=" +
               std::to_string(p.rank) + ")";
      });
  m.def("layout_props",
      [](const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
         uint64_t address, int bits) {
        if (shape.empty() || shape.size() > size_t(cutecall::abi::kMaxRank) ||
            strides.size() != shape.size() || bits < 1 || bits > 255) {
          throw nb::value_error("cutecall: layout_props: bad shape/strides/bits");
        }
        cutecall::dlpack::Tensor t{};
        t.data = reinterpret_cast<void*>(address);
        t.ndim = int32_t(shape.size());
        t.dtype = {2, uint8_t(bits), 1};
        t.shape = const_cast<int64_t*>(shape.data());
        t.strides = const_cast<int64_t*>(strides.data());
        return py::ReadLayout(t);
      },
      nb::arg("shape"), nb::arg("strides"), nb::arg("address"), nb::arg("bits"),
      "The LayoutProps the launcher reads from a tensor.");

  py::BindKernelEntry(m);
  py::BindBundle(m);
  py::BindTensorLauncher(m);
  py::BindEagerCall(m);
  // Launchers live as long as the Python objects that own them, which may
  // be alive at interpreter exit (e.g. referenced from torch's op registry).
  nb::set_leak_warnings(false);
}
