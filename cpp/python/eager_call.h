// eager_call.h — a launch object class's eager calls straight into C++.
//
// Owns: `_core.set_eager_call(cls, attr, flags, flag)`. From then on a call
// `k(*args)` of an instance of exactly `cls` runs, in C, what cls's Python
// `__call__` runs in eager mode -- `getattr(k, attr)(*args)`, straight into
// TensorLauncher's call when that attribute is one -- without a Python frame:
// the class's tp_call slot is set to this file's function. Whenever
// `flags[flag]` (a module's dict entry, e.g. torch.compiler's
// `_is_compiling_flag`) is true, or keywords are passed, the call runs the
// class's own Python `__call__` instead.
// Contract: the caller's `__call__` must equal `getattr(self, attr)(*args)`
// whenever the flag is false (the launch object's eager path). The class
// keeps its Python `__call__` in its dict: what torch.compile (Dynamo)
// reads and inlines, what subclasses run (their tp_call is CPython's), and
// what an assignment to `cls.__call__` restores (it resets the slot).
#ifndef CUTECALL_PYTHON_EAGER_CALL_H_
#define CUTECALL_PYTHON_EAGER_CALL_H_

#include <nanobind/nanobind.h>

namespace cutecall::py {

// Registers `_core.set_eager_call`.
void BindEagerCall(nanobind::module_& m);

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_EAGER_CALL_H_
