"""Runtime scalars: which values a call may pass as one, and their 8 raw
ABI bytes (the ``scalars`` attribute of the custom call), checked against
the type's range before any compile or launch.

The type codes come from ``_core`` (defined once, in C++: abi.h).
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from .. import _core

# CuTe DSL numeric types a launcher can take as a runtime scalar, in ABI
# code order: defined once, in C++ (abi.h), and pinned by a test.
SCALAR_TYPES = tuple(_core.SCALAR_TYPES)
_INT_RANGE = {"Int8": (-2**7, 2**7), "Int16": (-2**15, 2**15),
              "Int32": (-2**31, 2**31), "Int64": (-2**63, 2**63),
              "Uint8": (0, 2**8), "Uint16": (0, 2**16), "Uint32": (0, 2**32),
              "Uint64": (0, 2**64)}


@dataclasses.dataclass(frozen=True)
class ScalarArg:
    """One runtime scalar of one call: its type and its 8 raw ABI bytes as an
    int64 (the ``scalars`` attribute of the custom call)."""

    name: str
    scalar_type: str
    bits: int


def is_scalar_value(x) -> bool:
    """A Python or NumPy scalar: a value known on the host. An array, even
    of one element, is not one (``concrete_scalar`` reads those)."""
    return isinstance(x, (bool, numbers.Number, np.generic))


def python_value(x, what: str):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (bool, numbers.Number)):
        return x
    raise TypeError(f"cutecall: {what} must be a Python or NumPy scalar, got "
                    f"{type(x).__name__}: {x!r}")


def concrete_scalar(x, what: str):
    """`x` as a Python value if it is a scalar known on the host (a Python or
    NumPy scalar, or a concrete array of one element); else a TypeError
    naming `what`. Fronts whose values may be traced check that first (the
    JAX front's ``scalar_value``)."""
    if is_scalar_value(x):
        return python_value(x, what)
    if hasattr(x, "shape") and tuple(x.shape) in ((), (1,)) and hasattr(x, "item"):
        return x.item()
    raise TypeError(f"cutecall: {what} must be a scalar, got "
                    f"{type(x).__name__}: {x!r}")


def infer_scalar_type(value) -> str:
    """The runtime type of an unannotated scalar parameter."""
    if isinstance(value, (bool, np.bool_)):
        return "Boolean"
    if isinstance(value, (numbers.Integral, np.integer)):
        return "Int64"
    if isinstance(value, (numbers.Real, np.floating)):
        return "Float32"
    raise TypeError(f"cutecall: cannot pass {type(value).__name__} {value!r} "
                    "as a runtime scalar (bool, int and float are supported)")


def encode_scalar(name: str, scalar_type: str, value) -> ScalarArg:
    what = f"runtime scalar {name!r} ({scalar_type})"
    if scalar_type == "Boolean":
        if not isinstance(value, (bool, np.bool_, numbers.Integral)) or \
                int(value) not in (0, 1):
            raise TypeError(f"cutecall: {what} must be a bool, got {value!r}")
        return ScalarArg(name, scalar_type, int(bool(value)))
    if scalar_type in _INT_RANGE:
        if isinstance(value, (bool, np.bool_)) or \
                not isinstance(value, (numbers.Integral, np.integer)):
            raise TypeError(f"cutecall: {what} must be an int, got "
                            f"{type(value).__name__}: {value!r}")
        lo, hi = _INT_RANGE[scalar_type]
        v = int(value)
        if not lo <= v < hi:
            raise ValueError(f"cutecall: {what} = {v} is out of range "
                             f"[{lo}, {hi - 1}]")
        return ScalarArg(name, scalar_type, v - 2**64 if v >= 2**63 else v)
    if scalar_type in ("Float32", "Float64"):
        if not isinstance(value, (numbers.Real, np.floating, np.integer)):
            raise TypeError(f"cutecall: {what} must be a real number, got "
                            f"{type(value).__name__}: {value!r}")
        if scalar_type == "Float32":
            with np.errstate(over="ignore"):
                f32 = np.array(value, dtype=np.float32)
            if np.isfinite(float(value)) and not np.isfinite(f32):
                raise ValueError(f"cutecall: {what} = {value!r} is out of range for "
                                 f"Float32 (largest finite 3.4028235e+38); NaN and inf "
                                 f"are accepted")
            bits = int(f32.view(np.int32))
        else:
            bits = int(np.array(value, dtype=np.float64).view(np.int64))
        return ScalarArg(name, scalar_type, bits)
    raise TypeError(f"cutecall: {what}: unsupported scalar type; supported: "
                    f"{', '.join(SCALAR_TYPES)}")
