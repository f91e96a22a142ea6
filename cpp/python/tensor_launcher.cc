// tensor_launcher.cc — `_core.TensorLauncher` (tensor_launcher.h): the
// course of one call (describe the arguments, find their specialization,
// else ask `on_miss` once, then run), reading arguments into the call's
// signature and the plan, and the Python type (a tp_call slot that skips
// nanobind's overload dispatch, garbage-collection slots).
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
  Run(*e, args, call);
  return nb::none();
}

double TensorLauncher::TimeLaunches(size_t count, nb::args args) {
  Call(args);  // compiles if needed, and validates
  CallInfo call;
  if (!Describe(args, &call)) throw std::runtime_error("cutecall: not launchable");
  Entry* e = table_.Find(call);
  if (e == nullptr) throw std::runtime_error("cutecall: no specialization");
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < count; ++i) Run(*e, args, call);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

void TensorLauncher::SetStatic(std::vector<uint16_t> masks) {
  if (masks.size() > kMaxArgs) throw nb::value_error("cutecall: too many masks");
  clear();
  static_ = std::move(masks);
}

void TensorLauncher::Miss(const nb::args& args, CallInfo* call) {
  nb::list props;
  for (size_t i = 0; i < args.size(); ++i) {
    // Described tensors only.
    const bool tensor = i < call->described && call->tag(i) == kTagTensor;
    props.append(tensor ? nb::cast(ReadLayout(call->tensors[i]))
                        : nb::object(nb::none()));
  }
  if (!on_miss_.is_valid()) {
    throw std::runtime_error("cutecall: kernel '" + name_ +
                             "': launcher was cleared by the garbage collector");
  }
  nb::object spec = on_miss_(args, props);
  // Python ran (and may have changed which extents are compiled in): read
  // the arguments again before registering under their signature.
  const bool ok = Describe(args, call);
  if (spec.is_none()) return;
  if (!ok) {
    throw std::runtime_error("cutecall: kernel '" + name_ +
                             "': on_miss returned a specialization for "
                             "arguments the fast path cannot take");
  }
  table_.Register(*call, nb::cast<const KernelEntry&>(spec));
}

// -- reading a call's arguments, packing and launching (the per-call path:
// no allocation) --------------------------------------------------------

const dlpack::ExchangeApi* TensorLauncher::ApiFor(PyTypeObject* type) {
  if (type == last_type_) return last_api_;
  for (auto& [t, api] : apis_) {
    if (t == type) {
      last_type_ = type;
      last_api_ = api;
      return api;
    }
  }
  const dlpack::ExchangeApi* api = nullptr;
  PyObject* cap = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type),
                                         dlpack::kAttribute);
  if (cap == nullptr) {
    PyErr_Clear();
  } else {
    void* p = PyCapsule_IsValid(cap, dlpack::kCapsuleName)
                  ? PyCapsule_GetPointer(cap, dlpack::kCapsuleName)
                  : nullptr;
    PyErr_Clear();
    auto* candidate = static_cast<const dlpack::ExchangeApi*>(p);
    if (candidate != nullptr &&
        candidate->header.version.major == dlpack::kMajorVersion &&
        candidate->dltensor_from_py_object_no_sync != nullptr &&
        candidate->current_work_stream != nullptr) {
      api = candidate;
    }
    Py_DECREF(cap);
  }
  Py_INCREF(reinterpret_cast<PyObject*>(type));  // the cache pins the type
  apis_.emplace_back(type, api);
  last_type_ = type;
  last_api_ = api;
  return api;
}

bool TensorLauncher::Describe(const nb::args& args, CallInfo* call) {
  call->n = args.size();
  call->sig_len = 0;
  call->described = 0;
  call->device = -1;
  call->api = nullptr;
  call->ok = false;
  if (call->n > kMaxArgs) return false;
  int64_t* sig = call->signature;
  for (size_t i = 0; i < call->n; ++i) {
    PyObject* o = args[i].ptr();
    const bool cx = i < constexpr_.size() && constexpr_[i];
    call->arg_at[i] = call->sig_len;
    if (o == Py_None) {
      sig[call->sig_len++] = kTagNone;
      sig[call->sig_len++] = 0;
    } else if (PyBool_Check(o)) {
      sig[call->sig_len++] = kTagBool;
      sig[call->sig_len++] = cx ? int64_t(o == Py_True) : 0;
    } else if (PyLong_Check(o)) {
      int64_t v = 0;
      if (cx) {
        int overflow = 0;
        v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
          PyErr_Clear();
          return false;
        }
      }
      sig[call->sig_len++] = kTagInt;
      sig[call->sig_len++] = v;
    } else if (PyFloat_Check(o)) {
      int64_t bits = 0;
      if (cx) {
        double d = PyFloat_AS_DOUBLE(o);
        std::memcpy(&bits, &d, sizeof bits);
      }
      sig[call->sig_len++] = kTagFloat;
      sig[call->sig_len++] = bits;
    } else {
      const dlpack::ExchangeApi* api = ApiFor(Py_TYPE(o));
      if (api == nullptr) return false;
      dlpack::Tensor& t = call->tensors[i];
      if (api->dltensor_from_py_object_no_sync(o, &t) != 0) {
        PyErr_Clear();
        return false;
      }
      if (t.device.device_type != dlpack::kDLCUDA || t.ndim < 1 ||
          t.ndim > abi::kMaxRank) {
        return false;
      }
      if (call->device < 0) {
        call->device = t.device.device_id;
        call->api = api;
      } else if (call->device != t.device.device_id) {
        return false;
      }
      const StaticMask mask = i < static_.size() ? static_[i] : 0;
      call->sig_len += AppendTensorSignature(t, mask, sig + call->sig_len);
    }
    call->described = i + 1;
  }
  call->ok = call->device >= 0;
  return call->ok;
}

void TensorLauncher::Run(const Entry& e, const nb::args& args,
                         const CallInfo& call) {
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
      scalars[u.index] = ReadScalarSlot(args[i].ptr(), u.scalar_type,
                                        e.state->plan().kernel_name(), i);
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
      .def("set_static", &TensorLauncher::SetStatic, nb::arg("masks"),
           "Per argument: bit d = extent d, bit 8+d = stride d compiled in.")
      .def_prop_ro("name", &TensorLauncher::name);
  m.attr("MAX_LAUNCHER_ARGS") = kMaxArgs;
  m.attr("MAX_LAUNCHER_ENTRIES") = kMaxEntries;
}

}  // namespace cutecall::py
