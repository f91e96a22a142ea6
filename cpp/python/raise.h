// raise.h — a core Status as the Python exception the bindings raise.
#ifndef CUTECALL_PYTHON_RAISE_H_
#define CUTECALL_PYTHON_RAISE_H_

#include <nanobind/nanobind.h>

#include <stdexcept>

#include "cutecall/status.h"

namespace cutecall::py {

// InvalidArgument -> ValueError; every other code -> RuntimeError.
[[noreturn]] inline void Raise(const Status& s) {
  if (s.code() == Code::kInvalidArgument) {
    throw nanobind::value_error(s.message().c_str());
  }
  throw std::runtime_error(s.message());
}

}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_RAISE_H_
