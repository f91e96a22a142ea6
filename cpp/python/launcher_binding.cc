// launcher_binding.cc — `_core.TensorLauncher` as a Python type
// (tensor_launcher.h): its methods, a tp_call slot that skips nanobind's
// overload dispatch, garbage-collection slots, and `_core.layout_props`.
#include "tensor_launcher.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace cutecall::py {

// The Python callback may refer back to this launcher (a cycle): the type
// takes part in garbage collection through these two slots.
int TensorLauncher::Traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Py_VISIT(nb::inst_ptr<TensorLauncher>(self)->on_miss_.ptr());
  return 0;
}

int TensorLauncher::Clear(PyObject* self) {
  nb::inst_ptr<TensorLauncher>(self)->on_miss_.reset();
  return 0;
}

// tp_call: the hot path skips nanobind's overload dispatch; exceptions are
// translated here, as nanobind would.
PyObject* TensorLauncher::TpCall(PyObject* self, PyObject* args,
                                 PyObject* kwargs) {
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError,
                    "cutecall: a launcher takes positional arguments only");
    return nullptr;
  }
  try {
    return nb::inst_ptr<TensorLauncher>(self)
        ->Call(nb::borrow<nb::args>(args))
        .release()
        .ptr();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::builtin_exception& e) {
    PyErr_SetString(e.type() == nb::exception_type::value_error
                        ? PyExc_ValueError
                        : PyExc_RuntimeError,
                    e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

void BindTensorLauncher(nb::module_& m) {
  static PyType_Slot slots[] = {
      {Py_tp_traverse, reinterpret_cast<void*>(&TensorLauncher::Traverse)},
      {Py_tp_clear, reinterpret_cast<void*>(&TensorLauncher::Clear)},
      {Py_tp_call, reinterpret_cast<void*>(&TensorLauncher::TpCall)},
      {0, nullptr}};
  nb::class_<TensorLauncher>(m, "TensorLauncher", nb::type_slots(slots),
      "Launches one kernel's specializations with DLPack-exchange tensors "
      "(torch) on the tensors' current stream. Calls go straight to C++; "
      "on_miss(args, props) is called for new or unsupported arguments.")
      .def(nb::init<std::string, std::vector<bool>, nb::callable>(),
           nb::arg("name"), nb::arg("constexpr_positions"), nb::arg("on_miss"))
      .def("__len__", &TensorLauncher::size)
      .def("time_launches", &TensorLauncher::TimeLaunches, nb::arg("count"),
           nb::arg("args"),
           "Seconds for `count` launches of `args` from one C++ loop.")
      .def("clear", &TensorLauncher::clear)
      .def("set_static", &TensorLauncher::SetStatic, nb::arg("masks"),
           "Per argument: bit d = extent d, bit 8+d = stride d compiled in.")
      .def_prop_ro("name", &TensorLauncher::name);
  m.def("layout_props",
        [](const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
           uint64_t address, int bits) {
          if (shape.empty() || shape.size() > size_t(abi::kMaxRank) ||
              strides.size() != shape.size() || bits < 1 || bits > 255) {
            throw nb::value_error("cutecall: layout_props: bad shape/strides/bits");
          }
          dlpack::Tensor t{};
          t.data = reinterpret_cast<void*>(address);
          t.ndim = int32_t(shape.size());
          t.dtype = {2, uint8_t(bits), 1};
          t.shape = const_cast<int64_t*>(shape.data());
          t.strides = const_cast<int64_t*>(strides.data());
          return PropsTuple(ReadLayout(t));
        },
        nb::arg("shape"), nb::arg("strides"), nb::arg("address"), nb::arg("bits"),
        "The layout facts the launcher reads from a tensor: (unit_dim, align, "
        "wide, extent classes, stride classes).");
  m.attr("MAX_LAUNCHER_ARGS") = kMaxArgs;
  m.attr("MAX_LAUNCHER_ENTRIES") = kMaxEntries;
}

}  // namespace cutecall::py
