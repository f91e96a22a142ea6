// eager_call.cc — `_core.set_eager_call` (eager_call.h): a class's tp_call
// that runs its launch object's eager path in C.
#include "eager_call.h"

#include <nanobind/stl/string.h>

#include <string>
#include <vector>

#include "tensor_launcher.h"

namespace nb = nanobind;

namespace cutecall::py {
namespace {

// One class set up by set_eager_call. The references live to exit (classes
// holding launch objects are module-level: registered once).
struct EagerClass {
  PyTypeObject* type;      // the class
  PyObject* python_call;   // its __call__, the Python function
  PyObject* attr;          // the attribute holding the eager callable
  PyObject* flags;         // a module's __dict__
  PyObject* flag;          // the key there that says "compiling"
};

std::vector<EagerClass>& Classes() {
  static auto* classes = new std::vector<EagerClass>();  // lives to exit
  return *classes;
}

PyTypeObject* g_launcher_type = nullptr;

const EagerClass* Find(PyTypeObject* type) {
  for (const EagerClass& c : Classes()) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

// Whether flags[flag] is true; an error (cleared) reads as true, so the
// call takes the Python path, which reports it if it matters.
bool Compiling(const EagerClass& c) {
  PyObject* v = PyDict_GetItemWithError(c.flags, c.flag);  // borrowed
  if (v == nullptr) {
    if (!PyErr_Occurred()) return false;
    PyErr_Clear();
    return true;
  }
  if (v == Py_False) return false;
  const int truth = PyObject_IsTrue(v);
  if (truth < 0) PyErr_Clear();
  return truth != 0;
}

// The class's own __call__(self, *args, **kwargs).
PyObject* CallPython(PyObject* python_call, PyObject* self, PyObject* args,
                     PyObject* kwargs) {
  PyObject* bound = PyMethod_New(python_call, self);
  if (bound == nullptr) return nullptr;
  PyObject* result = PyObject_Call(bound, args, kwargs);
  Py_DECREF(bound);
  return result;
}

PyObject* EagerTpCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  const EagerClass* c = Find(Py_TYPE(self));
  if (c == nullptr) {  // not a class set up here: its type's own __call__
    PyObject* call = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(self)),
                                            "__call__");
    if (call == nullptr) return nullptr;
    PyObject* result = CallPython(call, self, args, kwargs);
    Py_DECREF(call);
    return result;
  }
  if ((kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) || Compiling(*c)) {
    return CallPython(c->python_call, self, args, kwargs);
  }
  PyObject* target = PyObject_GetAttr(self, c->attr);
  if (target == nullptr) return nullptr;
  PyObject* result = Py_TYPE(target) == g_launcher_type
                         ? TensorLauncher::TpCall(target, args, nullptr)
                         : PyObject_Call(target, args, nullptr);
  Py_DECREF(target);
  return result;
}

void SetEagerCall(nb::handle cls, const std::string& attr, nb::handle flags_module,
                  const std::string& flag) {
  if (!PyType_Check(cls.ptr()) ||
      !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(cls.ptr()), Py_TPFLAGS_HEAPTYPE)) {
    throw nb::type_error("cutecall: set_eager_call takes a class defined in Python");
  }
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  PyObject* call = PyDict_GetItemString(type->tp_dict, "__call__");  // borrowed
  if (call == nullptr || !PyFunction_Check(call)) {
    throw nb::type_error("cutecall: set_eager_call: the class defines no Python __call__");
  }
  PyObject* flags = PyModule_Check(flags_module.ptr())
                        ? PyModule_GetDict(flags_module.ptr())  // borrowed
                        : nullptr;
  if (flags == nullptr) {
    throw nb::type_error("cutecall: set_eager_call: `flags` must be a module");
  }
  if (g_launcher_type == nullptr) {
    g_launcher_type = reinterpret_cast<PyTypeObject*>(nb::type<TensorLauncher>().ptr());
  }
  if (Find(type) == nullptr) {
    Py_INCREF(cls.ptr());
    Py_INCREF(call);
    Py_INCREF(flags);
    Classes().push_back({type, call, PyUnicode_InternFromString(attr.c_str()), flags,
                         PyUnicode_InternFromString(flag.c_str())});
  }
  type->tp_call = &EagerTpCall;
  PyType_Modified(type);
}

}  // namespace

void BindEagerCall(nb::module_& m) {
  m.def("set_eager_call", &SetEagerCall, nb::arg("cls"), nb::arg("attr"),
        nb::arg("flags"), nb::arg("flag"),
        "Calls of instances of `cls` run `getattr(self, attr)(*args)` in C "
        "(straight into a TensorLauncher) while `flags.<flag>` is false and no "
        "keywords are passed, else cls's own Python __call__, which stays in "
        "the class for torch.compile to read.");
}

}  // namespace cutecall::py
