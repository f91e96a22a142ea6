// launcher_args.cc — one TensorLauncher call's arguments (tensor_launcher.h):
// read from their Python objects into the call's signature (tensors through
// the DLPack C exchange API), then into the specialization's plan (buffer
// views, scalar slots), and launched. The per-call path: no allocation.
#include "tensor_launcher.h"

#include <nanobind/stl/string.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "raise.h"

namespace nb = nanobind;

namespace cutecall::py {
namespace {

constexpr const char* kScalarNames[] = {
    "Boolean", "Int8", "Int16", "Int32", "Int64", "Uint8",
    "Uint16", "Uint32", "Uint64", "Float32", "Float64"};

// Argument `i` of a call of `e`, a scalar used as `u`, into its slot; errors
// name the kernel, the argument and the value.
void ReadScalar(const Entry& e, size_t i, const Use& u, PyObject* o,
                abi::Slot* out) {
  abi::Slot s;
  s.bits = 0;
  auto fail = [&](const std::string& why) {
    throw nb::value_error(("cutecall: kernel '" + e.state->plan().kernel_name() +
                           "': argument " + std::to_string(i) + " (" +
                           kScalarNames[u.type] + ") " + why)
                              .c_str());
  };
  switch (u.type) {
    case kBoolean:
      s.i64 = PyObject_IsTrue(o) == 1;
      break;
    case kFloat32:
    case kFloat64: {
      double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        fail("= " + nb::cast<std::string>(nb::str(nb::handle(o))) +
             " is not representable as a float");
      }
      if (u.type == kFloat32) {
        s.f32 = float(d);
      } else {
        s.f64 = d;
      }
      break;
    }
    case kUint64: {
      unsigned long long v = PyLong_AsUnsignedLongLong(o);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        fail("is out of range [0, 2**64)");
      }
      s.bits = v;
      break;
    }
    default: {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      static constexpr int64_t kLo[] = {0, -128, -32768, INT32_MIN, INT64_MIN, 0, 0, 0};
      static constexpr int64_t kHi[] = {1, 127, 32767, INT32_MAX, INT64_MAX,
                                        255, 65535, int64_t(UINT32_MAX)};
      if (overflow != 0 || v < kLo[u.type] || v > kHi[u.type]) {
        PyErr_Clear();
        fail("= " + nb::cast<std::string>(nb::str(nb::handle(o))) +
             " is out of range [" + std::to_string(kLo[u.type]) + ", " +
             std::to_string(kHi[u.type]) + "]");
      }
      s.i64 = v;
    }
  }
  *out = s;
}

}  // namespace

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
    const Use& u = e.uses[i];
    if (u.kind == kUseTensor || u.kind == kUseOutput) {
      const dlpack::Tensor& t = call.tensors[i];
      views[u.index] = BufferView{
          static_cast<char*>(t.data) + t.byte_offset, t.shape, t.ndim,
          t.strides};
      if (u.kind == kUseOutput) outputs_empty &= IsEmpty(views[u.index]);
    } else if (u.kind == kUseScalar) {
      ReadScalar(e, i, u, args[i].ptr(), &scalars[u.index]);
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

}  // namespace cutecall::py
