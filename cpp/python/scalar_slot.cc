// scalar_slot.cc — Python scalars into ABI slots (scalar_slot.h).
#include "scalar_slot.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <cstdint>

namespace nb = nanobind;

namespace cutecall::py {

abi::Slot ReadScalarSlot(PyObject* o, abi::ScalarType type,
                         const std::string& kernel, size_t arg) {
  abi::Slot s;
  s.bits = 0;
  const int t = int(type);
  auto fail = [&](const std::string& why) {
    throw nb::value_error(("cutecall: kernel '" + kernel + "': argument " +
                           std::to_string(arg) + " (" +
                           abi::kScalarTypeNames[t] + ") " + why)
                              .c_str());
  };
  auto shown = [&] { return nb::cast<std::string>(nb::str(nb::handle(o))); };
  switch (type) {
    case abi::ScalarType::kBoolean:
      s.i64 = PyObject_IsTrue(o) == 1;
      break;
    case abi::ScalarType::kFloat32:
    case abi::ScalarType::kFloat64: {
      double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        fail("= " + shown() + " is not representable as a float");
      }
      if (type == abi::ScalarType::kFloat32) {
        // Out of range becomes inf silently in C; NaN and inf stay accepted.
        if (std::isfinite(d) && !std::isfinite(float(d))) {
          fail("= " + shown() +
               " is out of range for Float32 (largest finite 3.4028235e+38)");
        }
        s.f32 = float(d);
      } else {
        s.f64 = d;
      }
      break;
    }
    case abi::ScalarType::kUint64: {
      unsigned long long v = PyLong_AsUnsignedLongLong(o);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        fail("is out of range [0, 2**64)");
      }
      s.bits = v;
      break;
    }
    default: {  // the integer types up to 64 bits, by code
      static constexpr int64_t kLo[] = {0, -128, -32768, INT32_MIN, INT64_MIN,
                                        0, 0, 0};
      static constexpr int64_t kHi[] = {1, 127, 32767, INT32_MAX, INT64_MAX,
                                        255, 65535, int64_t(UINT32_MAX)};
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        fail("= " + shown() + " is not an int");
      }
      if (overflow != 0 || v < kLo[t] || v > kHi[t]) {
        fail("= " + shown() + " is out of range [" + std::to_string(kLo[t]) +
             ", " + std::to_string(kHi[t]) + "]");
      }
      s.i64 = v;
    }
  }
  return s;
}

}  // namespace cutecall::py
