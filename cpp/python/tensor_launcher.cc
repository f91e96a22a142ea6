// tensor_launcher.cc — `_core.TensorLauncher` (tensor_launcher.h): the
// course of one call (describe the arguments, find their specialization,
// else ask `on_miss` once, then run), packing the leaves into the plan, and
// the Python type (a tp_call slot that skips nanobind's overload dispatch,
// garbage-collection slots). Reading the arguments: tensor_launcher_args.cc.
#include "tensor_launcher.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "raise.h"
#include "scalar_slot.h"

namespace nb = nanobind;

namespace cutecall::py {


nb::object TensorLauncher::Call(nb::args args) {
  CallInfo call;
  Entry* e = Describe(args, &call) ? table_.Find(call) : nullptr;
  if (e == nullptr) {
    Miss(args, &call);  // raises, or registers this call's specialization
    if (!call.ok) {
      throw std::runtime_error("cutecall: kernel '" + name_ +
                               "': on_miss accepted arguments the launcher "
                               "cannot describe");
    }
    e = table_.Find(call);
    if (e == nullptr) {
      throw std::runtime_error("cutecall: kernel '" + name_ +
                               "': on_miss returned no specialization");
    }
  }
  Run(*e, call);
  return nb::none();
}

double TensorLauncher::TimeLaunches(size_t count, nb::args args) {
  Call(args);  // compiles if needed, and validates
  CallInfo call;
  if (!Describe(args, &call)) throw std::runtime_error("cutecall: not launchable");
  Entry* e = table_.Find(call);
  if (e == nullptr) throw std::runtime_error("cutecall: no specialization");
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < count; ++i) Run(*e, call);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

void TensorLauncher::Miss(const nb::args& args, CallInfo* call) {
  // The described tensor leaves' layouts, in leaf order (all of them when
  // the whole call was described).
  nb::list props;
  for (size_t i = 0; i < call->described; ++i) {
    if (call->tag(i) == kTagTensor) props.append(ReadLayout(call->tensors[i]));
  }
  if (!on_miss_.is_valid()) {
    throw std::runtime_error("cutecall: kernel '" + name_ +
                             "': launcher was cleared by the garbage collector");
  }
  nb::object spec = on_miss_(args, props);
  // The call's words do not depend on static masks (the entry carries its
  // own): a call described in full is not described again.
  const bool ok = call->ok || Describe(args, call);
  if (spec.is_none()) return;
  if (!ok) {
    throw std::runtime_error("cutecall: kernel '" + name_ +
                             "': on_miss returned a specialization for "
                             "arguments the fast path cannot take");
  }
  table_.Register(*call, nb::cast<const KernelEntry&>(spec));
}

// -- packing and launching (the per-call path: no allocation) -------------

void TensorLauncher::Run(const Entry& e, const CallInfo& call) {
  BufferView views[kMaxArgs];
  abi::Slot scalars[abi::kMaxSlots];
  bool outputs_empty = e.has_outputs;
  for (size_t i = 0; i < call.n; ++i) {
    const ArgUse& u = e.uses[i];
    if (u.kind == UseKind::kTensor || u.kind == UseKind::kOutput) {
      const dlpack::Tensor& t = call.tensors[i];
      views[u.index] = BufferView{
          static_cast<char*>(t.data) + t.byte_offset, t.shape, t.ndim,
          t.strides};
      if (u.kind == UseKind::kOutput) outputs_empty &= IsEmpty(views[u.index]);
    } else if (u.kind == UseKind::kScalar) {
      PyObject* o = call.leaves[i];
      if (call.tag(i) == kTagDslScalar) {  // a CuTe DSL value: its .value
        nb::object v = nb::steal(PyObject_GetAttrString(o, "value"));
        if (!v.is_valid()) throw nb::python_error();
        scalars[u.index] = ReadScalarSlot(v.ptr(), u.scalar_type,
                                          e.state->plan().kernel_name(), i);
      } else {
        scalars[u.index] = ReadScalarSlot(o, u.scalar_type,
                                          e.state->plan().kernel_name(), i);
      }
    }
  }
  // Nothing to write (a kernel would size its grid from the outputs, and
  // a grid of 0 blocks is a CUDA launch error): no launch.
  if (outputs_empty) return;
  void* stream = nullptr;
  if (call.api->current_work_stream(dlpack::kDLCUDA, call.device, &stream) != 0) {
    throw nb::python_error();
  }
  if (driver_ == nullptr) {
    ErrorOr<const DriverTable*> d = Driver();
    if (!d.ok()) Raise(d.status());
    driver_ = d.value();
  }
  Status s = OnDevice(*driver_, call.device, [&] {
    return e.state->Launch(stream, views, e.num_operands, scalars);
  });
  if (!s.ok()) Raise(s);
}

// -- the Python type ------------------------------------------------------


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
      .def("register_type", &TensorLauncher::RegisterType, nb::arg("type"),
           nb::arg("kind"), nb::arg("fields") = std::vector<std::string>(),
           "How calls read objects of `type`: 'node' (a container: its `fields`, "
           "in order), 'scalar' (a CuTe DSL value: its .value) or 'const' "
           "(compiled in: by identity).")
      .def_prop_ro("name", &TensorLauncher::name);
  m.attr("MAX_LAUNCHER_ARGS") = kMaxArgs;
  m.attr("MAX_LAUNCHER_ENTRIES") = kMaxEntries;
}

}  // namespace cutecall::py
