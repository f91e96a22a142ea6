// tensor_launcher_args.cc — reading one TensorLauncher call's arguments
// (tensor_launcher.h): tensors through the DLPack C exchange API, numbers,
// None, and pytree arguments (tuples and lists, NamedTuples included,
// dicts, dataclasses Python registered), depth first, into the call's leaves
// and its signature, the table's key. The per-call path: no allocation.
#include "tensor_launcher.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace cutecall::py {

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
  call->n = 0;
  call->sig_len = 0;
  call->described = 0;
  call->containers = 0;
  call->device = -1;
  call->api = nullptr;
  call->ok = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool cx = i < constexpr_.size() && constexpr_[i];
    if (!DescribeTree(args[i].ptr(), cx, 0, call)) return false;
  }
  call->ok = call->device >= 0;
  return call->ok;
}

bool TensorLauncher::DescribeTree(PyObject* o, bool cx, int depth, CallInfo* call) {
  // Containers first (a tensor is never one); their words make the tree's
  // shape part of the signature. Leaves: depth first, as the driver's
  // pytree.flatten orders them.
  const bool seq = PyTuple_Check(o) || PyList_Check(o);
  const TypeInfo* info = nullptr;
  if (!seq && !PyDict_Check(o) && o != Py_None && !PyBool_Check(o) &&
      !PyLong_Check(o) && !PyFloat_Check(o)) {
    info = Registered(Py_TYPE(o));
    if (info == nullptr || info->kind != TypeKind::kNode) {
      return DescribeLeaf(o, cx, depth > 0, info, call);
    }
  } else if (!seq && !PyDict_Check(o)) {
    return DescribeLeaf(o, cx, depth > 0, nullptr, call);
  }
  if (depth >= kMaxDepth || ++call->containers > kMaxContainers ||
      call->sig_len + 2 > kMaxSignatureWords) {
    return false;
  }
  int64_t* sig = call->signature;
  if (seq) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    sig[call->sig_len++] = kTagSequence | int64_t(n) << 8;
    sig[call->sig_len++] = reinterpret_cast<int64_t>(Py_TYPE(o));
    PyObject** items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t k = 0; k < n; ++k) {
      if (!DescribeTree(items[k], false, depth + 1, call)) return false;
    }
    return true;
  }
  if (info == nullptr) {  // a dict: its keys (by hash) in insertion order
    sig[call->sig_len++] = kTagDict | int64_t(PyDict_GET_SIZE(o)) << 8;
    sig[call->sig_len++] = 0;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &key, &value)) {
      const Py_hash_t h = PyObject_Hash(key);
      if (h == -1 || call->sig_len + 1 > kMaxSignatureWords) {
        PyErr_Clear();
        return false;
      }
      sig[call->sig_len++] = int64_t(h);
      if (!DescribeTree(value, false, depth + 1, call)) return false;
    }
    return true;
  }
  // A registered dataclass: its fields, by name, in order. The values stay
  // alive in the object while the call runs (no Python runs until Run).
  sig[call->sig_len++] = kTagNode;
  sig[call->sig_len++] = reinterpret_cast<int64_t>(Py_TYPE(o));
  for (const nb::object& field : info->fields) {
    PyObject* v = PyObject_GetAttr(o, field.ptr());
    if (v == nullptr) {
      PyErr_Clear();
      return false;
    }
    Py_DECREF(v);
    if (!DescribeTree(v, false, depth + 1, call)) return false;
  }
  return true;
}

bool TensorLauncher::DescribeLeaf(PyObject* o, bool cx, bool nested,
                                  const TypeInfo* info, CallInfo* call) {
  // A number's value joins the signature at a constexpr position (Helion's
  // launcher). Inside a pytree a number may be a runtime scalar (a field
  // annotated Float32) or compile-time: the signature holds its type only,
  // and an entry's compile-time leaves are compared by value (Entry::consts).
  (void)nested;
  const size_t i = call->n;
  if (i >= kMaxArgs || call->sig_len + kMaxArgWords > kMaxSignatureWords) {
    return false;
  }
  const bool value = cx;
  int64_t* sig = call->signature;
  call->arg_at[i] = call->sig_len;
  call->leaves[i] = o;
  if (o == Py_None) {
    sig[call->sig_len++] = kTagNone;
    sig[call->sig_len++] = 0;
  } else if (PyBool_Check(o)) {
    sig[call->sig_len++] = kTagBool;
    sig[call->sig_len++] = value ? int64_t(o == Py_True) : 0;
  } else if (PyLong_Check(o)) {
    int64_t v = 0;
    if (value) {
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
    if (value) {
      double d = PyFloat_AS_DOUBLE(o);
      std::memcpy(&bits, &d, sizeof bits);
    }
    sig[call->sig_len++] = kTagFloat;
    sig[call->sig_len++] = bits;
  } else if (info != nullptr) {
    // A CuTe DSL value (a runtime scalar, read through .value at launch) or
    // a compile-time value (compared by value after the lookup): by type.
    const bool scalar = info->kind == TypeKind::kValueScalar;
    sig[call->sig_len++] = scalar ? kTagDslScalar : kTagConst;
    sig[call->sig_len++] = reinterpret_cast<int64_t>(Py_TYPE(o));
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
    // Mask-independent words: an entry's compiled-in values are its key's.
    call->sig_len += AppendTensorSignature(t, 0, sig + call->sig_len);
  }
  call->n = i + 1;
  call->described = call->n;
  return true;
}

const TensorLauncher::TypeInfo* TensorLauncher::Registered(PyTypeObject* type) const {
  for (const auto& [t, info] : types_) {
    if (t == type) return &info;
  }
  return nullptr;
}

void TensorLauncher::RegisterType(nb::handle type, const std::string& kind,
                                  std::vector<std::string> fields) {
  if (!PyType_Check(type.ptr())) throw nb::type_error("cutecall: register_type takes a type");
  TypeInfo info;
  if (kind == "node") {
    info.kind = TypeKind::kNode;
    for (const std::string& f : fields) {
      info.fields.push_back(nb::steal(PyUnicode_InternFromString(f.c_str())));
    }
  } else if (kind == "scalar") {
    info.kind = TypeKind::kValueScalar;
  } else if (kind == "const") {
    info.kind = TypeKind::kConst;
  } else {
    throw nb::value_error("cutecall: register_type kind must be node, scalar or const");
  }
  auto* t = reinterpret_cast<PyTypeObject*>(type.ptr());
  for (auto& [known, existing] : types_) {
    if (known == t) {
      existing = std::move(info);
      return;
    }
  }
  Py_INCREF(type.ptr());  // the registry pins the type
  types_.emplace_back(t, std::move(info));
}

}  // namespace cutecall::py
