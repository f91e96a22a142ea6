"""Array element types: the CuTe DSL type each framework dtype reaches the
kernel as, by dtype *name* (``"float32"``, ``"bfloat16"``: what NumPy, JAX
and torch call them), so no framework is imported here.

Example::

    from cutecall._driver import dtypes
    dtypes.cutlass_dtype("bfloat16", "input 'x'")   # ("BFloat16", 2)
"""

from __future__ import annotations

# dtype name -> (CuTe DSL type name, bytes per element)
_DTYPES = {
    # XLA stores PRED as one byte and the DSL has no i1 tensors in global
    # memory, so bool arrays reach the kernel as Uint8 tensors of 0/1.
    "bool": ("Uint8", 1),
    "int8": ("Int8", 1), "int16": ("Int16", 2), "int32": ("Int32", 4),
    "int64": ("Int64", 8),
    "uint8": ("Uint8", 1), "uint16": ("Uint16", 2), "uint32": ("Uint32", 4),
    "uint64": ("Uint64", 8),
    "float16": ("Float16", 2), "bfloat16": ("BFloat16", 2),
    "float32": ("Float32", 4), "float64": ("Float64", 8),
    "float8_e4m3fn": ("Float8E4M3FN", 1), "float8_e5m2": ("Float8E5M2", 1),
    "float8_e8m0fnu": ("Float8E8M0FNU", 1), "float8_e4m3": ("Float8E4M3", 1),
    "float8_e4m3b11fnuz": ("Float8E4M3B11FNUZ", 1),
    # Sub-byte types: two elements per byte; elem_bytes is informational.
    "int4": ("Int4", 1), "float4_e2m1fn": ("Float4E2M1FN", 1),
}


def dtype_name(dtype) -> str:
    """The name of a NumPy/JAX dtype, a torch dtype (``torch.float32``) or a
    dtype name, without importing a framework."""
    if isinstance(dtype, str):
        return dtype.removeprefix("torch.")
    name = getattr(dtype, "name", None)  # numpy and ml_dtypes dtypes
    if isinstance(name, str):
        return name
    return str(dtype).removeprefix("torch.")


def lookup(dtype) -> tuple[str, int] | None:
    """(CuTe DSL type name, bytes per element) of `dtype`, or None."""
    name = dtype_name(dtype)
    if name not in _DTYPES:
        try:  # numpy scalar types (np.float32) and aliases ("f4")
            import numpy as np
            name = np.dtype(dtype).name
        except TypeError:
            return None
    return _DTYPES.get(name)


def supported() -> str:
    return ", ".join(sorted(_DTYPES))


def is_known(name: str) -> bool:
    """Whether `name` is a dtype name cutecall passes to kernels."""
    return name in _DTYPES


def from_dsl_type(dsl_name: str) -> str | None:
    """The dtype name of a CuTe DSL type name (``"Float32"`` -> ``"float32"``;
    ``"Boolean"`` -> ``"bool"``), or None."""
    if dsl_name == "Boolean":
        return "bool"
    return next((n for n, (d, _) in _DTYPES.items() if d == dsl_name and n != "bool"),
                None)


def cutlass_dtype(dtype, what: str) -> tuple[str, int]:
    """Like :func:`lookup`; raises naming `what` for an unsupported dtype."""
    entry = lookup(dtype)
    if entry is None:
        raise TypeError(f"cutecall: {what} has dtype {dtype_name(dtype)}, which "
                        f"cutecall does not map to a CuTe DSL type; supported: "
                        f"{supported()}")
    return entry
