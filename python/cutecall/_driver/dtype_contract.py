"""Declared element types: the ``dtypes=`` contract of a call site.

A CuTe DSL launcher's ``cute.Tensor`` parameters carry no element type, so
a kernel written for float32 compiles for an int32 array too (another
specialization) and runs: reading int32 bits as floats. A call site says
which dtypes its arrays must have::

    add = cutecall.cutlass_call(vector_add, output_shape_dtype=...,
                                dtypes={"a": "float32", "b": "float32", "c": "float32"})
    k = cutecall.torch.kernel(vector_add, dtypes={"a": torch.float32, ...})

and a call with another dtype is refused before anything compiles, naming
the argument, the dtype given and the one declared. Keys are launcher
parameter names, or an array leaf inside one (``"epilogue_args.mC"``,
``"pair[0]"``: the names errors show); a parameter's entry covers every
leaf inside it unless a leaf has its own. Values are a dtype -- a name
(``"bfloat16"``), a NumPy/JAX or torch dtype, a CuTe DSL type
(``cutlass.Float32``) -- or a tuple of them (any of these).

Why a call-site contract and not an annotation: the DSL's typed annotation
(``cute.Tensor[cutlass.Float32, shape, stride]``, its ``TypedTensor``)
needs a static shape and stride, which cutecall's one-compile-for-every-
shape launchers do not have; and a kernel object's element type is a
constructor argument (QuACK's ``Softmax(cutlass.BFloat16, N)``), which no
annotation of ``__call__`` can carry. A contract at the call site covers
functions and kernel objects, third-party kernels included, in both fronts,
as ``dims=`` does for extents. No framework, no CuTe DSL.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from . import dtypes
from .operand import SOURCE_ARG
from .signature import TENSOR, LauncherSignature


def dtype_of(value, what: str) -> str:
    """The dtype name of one declared value: a name, a NumPy/JAX or torch
    dtype, or a CuTe DSL numeric type. Raises a TypeError naming `what`."""
    if isinstance(value, type) and value.__module__.startswith("cutlass"):
        name = dtypes.from_dsl_type(value.__name__)
        if name is not None:
            return name
    name = dtypes.dtype_name(value) if isinstance(value, str) or \
        hasattr(value, "name") or type(value).__module__ == "torch" else None
    if name is not None and dtypes.is_known(name):
        return name
    if not isinstance(value, str):
        try:  # numpy scalar types (np.float32, jnp.bfloat16)
            import numpy as np
            name = np.dtype(value).name
        except TypeError:
            name = None
        if name is not None and dtypes.is_known(name):
            return name
    raise TypeError(f"cutecall: {what} = {value!r} is not a dtype cutecall "
                    f"passes to kernels; use one of {dtypes.supported()} (a name, "
                    f"a NumPy/JAX or torch dtype, or a CuTe DSL type such as "
                    f"cutlass.Float32)")


class DtypeContract:
    """The dtypes one call site declares, checked against each call's
    operand descriptions (:meth:`check`). Empty when nothing is declared."""

    def __init__(self, declared: Mapping | None, sig: LauncherSignature, kernel: str):
        self.kernel = kernel
        self.declared: dict[str, frozenset] = {}
        if declared is None:
            return
        if not isinstance(declared, Mapping):
            raise TypeError(f"cutecall: dtypes must be a dict {{parameter: dtype or "
                            f"tuple of dtypes}}, got {type(declared).__name__}: "
                            f"{declared!r}")
        if declared and not sig.inspected:
            raise ValueError(f"cutecall: dtypes= names parameters, but launcher "
                             f"'{kernel}' takes *args (no names to declare them by)")
        for key, value in declared.items():
            _check_key(key, sig, kernel)
            values = value if isinstance(value, (tuple, list, set, frozenset)) else (value,)
            if not values:
                raise ValueError(f"cutecall: dtypes[{key!r}] of '{kernel}' is empty")
            self.declared[key] = frozenset(dtype_of(v, f"dtypes[{key!r}]") for v in values)

    def __bool__(self) -> bool:
        return bool(self.declared)

    def key_of(self, name: str) -> str | None:
        """The declared key covering operand `name` (the most specific)."""
        found = None
        for key in self.declared:
            if name == key or name.startswith((key + ".", key + "[")):
                if found is None or len(key) > len(found):
                    found = key
        return found

    def check(self, operands: Sequence) -> None:
        """Raises a TypeError for the first operand (``OperandDesc``) whose
        dtype the contract does not allow, naming it, its dtype and shape,
        and what is declared."""
        for op in operands:
            key = self.key_of(op.name) if self.declared else None
            if key is None:
                continue
            got = dtypes.dtype_name(op.dtype)
            allowed = self.declared[key]
            if got in allowed:
                continue
            want = " or ".join(sorted(allowed))
            if op.source == SOURCE_ARG:
                what, fix = "argument", (
                    f"convert it (JAX: .astype({sorted(allowed)[0]!r}), torch: "
                    f".to(torch.{sorted(allowed)[0]}))")
            else:
                what, fix = "output", "give that dtype in output_shape_dtype"
            raise TypeError(
                f"cutecall: {what} {op.name!r} of '{self.kernel}' is "
                f"{got}{list(op.shape)}, but dtypes= declares {want} for {key!r}; "
                f"{fix}, or add {got} to dtypes[{key!r}]")


def _check_key(key, sig: LauncherSignature, kernel: str) -> None:
    """A key names a tensor parameter of the launcher, or a leaf inside one."""
    if not isinstance(key, str) or not key:
        raise TypeError(f"cutecall: dtypes keys are parameter names (str), got "
                        f"{key!r}")
    head = key.split(".", 1)[0].split("[", 1)[0]
    by_name = {p.name: p for p in sig.params + sig.keyword_only}
    tensors = [p.name for p in sig.params if p.kind == TENSOR]
    p = by_name.get(head)
    if p is None:
        raise ValueError(f"cutecall: dtypes names {key!r}, which is not a parameter "
                         f"of '{kernel}'; its tensor parameters are "
                         f"{', '.join(tensors) or 'none'}")
    if p.kind != TENSOR:
        what = f"a runtime scalar ({p.scalar_type}), typed by its annotation" \
            if p.scalar_type else f"a {p.kind} parameter"
        raise ValueError(f"cutecall: dtypes names {key!r} of '{kernel}', which is "
                         f"{what}; dtypes= declares arrays: "
                         f"{', '.join(tensors) or 'none'}")
