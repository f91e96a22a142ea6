// scalar_slot.h — a Python scalar into the 8-byte ABI slot of a runtime
// scalar type (abi.h's ScalarType), as a launch object's call packs it.
//
// Contract: allocates nothing on success; a value the type cannot hold
// (out of an integer type's range, not a number) raises ValueError naming
// the kernel, the argument, the type and the value. Floats are rounded to
// the type (Float32: the nearest float).
#ifndef CUTECALL_PYTHON_SCALAR_SLOT_H_
#define CUTECALL_PYTHON_SCALAR_SLOT_H_

#include <Python.h>

#include <cstddef>
#include <string>

#include "cutecall/abi.h"

namespace cutecall::py {

// Reads `o`, argument `arg` of a call of `kernel`, as `type`.
abi::Slot ReadScalarSlot(PyObject* o, abi::ScalarType type,
                         const std::string& kernel, size_t arg);

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_SCALAR_SLOT_H_
