"""Array operands: what a front says about one array (:class:`OperandDesc`)
and what the driver compiles from it (:class:`OperandSpec`), through the one
function that checks and builds it, :func:`make_operand`.

A front only describes: dtype, extents (ints, or symbols a JAX trace may
hold), strides (or a compact stride order), pointer alignment, divisibility
classes, tied dim names, and which extents and strides it asks to compile in
-- a :data:`StaticMask`, the same bits the C++ launcher keys its calls by
(``_core.STATIC_STRIDE_SHIFT``). Everything else is the driver's.

No framework, no CuTe DSL.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Sequence

import numpy as np

from .. import _core
from . import dtypes, layout as _layout

SOURCE_ARG, SOURCE_RET = 0, 1
MAX_RANK = int(_core.MAX_RANK)
STRIDE_SHIFT = int(_core.STATIC_STRIDE_SHIFT)
EVERY_EXTENT = (1 << STRIDE_SHIFT) - 1
EVERYTHING = (1 << (2 * STRIDE_SHIFT)) - 1  # every extent and stride

StaticMask = int  # bit d: extent d compiled in; bit STRIDE_SHIFT + d: stride d


def static_mask(extents: Sequence[bool] = (), strides: Sequence[bool] = ()) -> int:
    """The mask compiling in the extents and strides marked True."""
    return sum(1 << d for d, s in enumerate(extents) if s) | \
        sum(1 << (STRIDE_SHIFT + d) for d, s in enumerate(strides) if s)


def static_extents(mask: int, rank: int) -> tuple[bool, ...]:
    return tuple(bool(mask >> d & 1) for d in range(rank))


def static_strides(mask: int, rank: int) -> tuple[bool, ...]:
    return tuple(bool(mask >> (STRIDE_SHIFT + d) & 1) for d in range(rank))


def is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Description:
    """One call's arrays as a front describes them for a binding: an
    :class:`OperandDesc` per array leaf (the input leaves, then the outputs
    the kernel writes), the tree of the kernel's outputs (None: none), the
    plan's operand and result counts (None: inputs, outputs), and the arch
    the arrays' device runs (None: the target's)."""

    operands: tuple
    output_tree: typing.Any = None
    num_args: int | None = None
    num_rets: int | None = None
    device_arch: str | None = None


@dataclasses.dataclass(frozen=True)
class OperandDesc:
    """One array operand as a front describes it (unchecked: see
    :func:`make_operand`).

    ``name`` names it in errors (the launcher parameter, plus a key path);
    ``source``/``index``: input or output, and its position among the
    call's inputs or outputs. ``strides`` None means compact in ``order``
    (CuTe stride ranks, None row-major); given strides make a strided
    operand whose unit-stride dim ``unit_dim`` is compiled in as 1.
    ``extent_div``/``stride_div`` None: the class of each known value."""

    name: str
    source: int
    index: int
    dtype: object
    shape: tuple
    strides: tuple | None = None
    order: tuple | None = None
    mode: tuple | None = None
    align: int = 16
    extent_div: tuple | None = None
    stride_div: tuple | None = None
    unit_dim: int = -1
    wide: bool = False
    static: int = 0
    dims: tuple | None = None


@dataclasses.dataclass(frozen=True)
class OperandSpec:
    """One kernel tensor operand, as compiled (hashable, content only)."""

    name: str
    source: int          # SOURCE_ARG or SOURCE_RET
    index: int           # XLA operand / result index
    cutlass_dtype: str
    elem_bytes: int
    rank: int
    static_shape: tuple  # int per static dim, None per dynamic dim
    divisibility: tuple  # int per dim (1 = no assumption)
    order: tuple         # CuTe stride ranks per dim
    mode: tuple | None
    align: int
    shape64: bool = False
    strided: bool = False
    static_stride: tuple = ()
    dims: tuple = ()     # dim name or None per dim (from TensorSpec.dims)
    tie: tuple = ()      # per dim: symbol index (shared runtime value) or -1
    # Per dim, strided operands: the divisibility class of a dynamic stride
    # (1 = no assumption). Compact operands derive theirs from the extents.
    stride_div: tuple = ()

    def key(self) -> list:
        return [self.name, self.source, self.index, self.cutlass_dtype,
                self.rank, list(self.static_shape), list(self.divisibility),
                list(self.order), None if self.mode is None else list(self.mode),
                self.align, self.shape64, self.strided, list(self.static_stride),
                list(self.tie), list(self.stride_div)]


def who(kernel: str | None, source: int, name: str) -> str:
    """How errors name an operand, as the launch-time checks do."""
    side = "input" if source == SOURCE_ARG else "output"
    return f"cutecall: kernel '{kernel}', {side} '{name}'" if kernel else f"cutecall: {name}"


def per_dim(value, rank: int, what: str, default) -> tuple:
    """`value` (None, one value for every dim, or one per dim) per dim."""
    if value is None:
        return (default,) * rank
    if isinstance(value, (bool, int, np.integer)):
        return (value,) * rank
    value = tuple(value)
    if len(value) != rank:
        raise ValueError(f"{what} has {len(value)} entries for a "
                         f"rank-{rank} operand: {value!r}")
    return value


def _permutation(value, rank: int, what: str) -> tuple | None:
    if value is None:
        return None
    value = tuple(int(x) for x in value)
    if sorted(value) != list(range(rank)):
        raise ValueError(f"{what} {value!r} is not a permutation of 0..{rank - 1}")
    return value


def _classes(given, values, fixed, rank, cap, w, what) -> tuple:
    """Per dim: 1 where `fixed` (compiled in); else the given class (>= 1,
    dividing a known value) or the class of the known value."""
    out = []
    for d, v in enumerate(per_dim(given, rank, f"{w}: {what}", None)):
        if v is None:
            v = _layout.divisibility_class(values[d], cap) if is_int(values[d]) else 1
        v = int(v)
        if v < 1:
            raise ValueError(f"{w}: {what} of dim {d} must be >= 1, got {v}")
        if is_int(values[d]) and values[d] % v:
            raise ValueError(f"{w}: dim {d} = {values[d]} is not divisible by {v}")
        out.append(1 if fixed[d] else v)
    return tuple(out)


def make_operand(d: OperandDesc, extra: int = 0,
                 kernel: str | None = None) -> OperandSpec:
    """Checks `d` and builds its spec, compiling in ``d.static | extra``
    (`extra`: a static-fallback rung). Errors name the operand and
    `kernel`, before anything compiles."""
    w = who(kernel, d.source, d.name)
    shape = tuple(d.shape)
    rank = len(shape)
    if rank == 0:
        raise ValueError(f"{w} is rank 0; pass a shape-(1,) array "
                         "(rank-0 tensors are not supported)")
    if rank > MAX_RANK:
        raise ValueError(f"{w} has rank {rank} > {MAX_RANK}")
    ct, nbytes = dtypes.cutlass_dtype(d.dtype, w.removeprefix("cutecall: "))
    mask = int(d.static) | int(extra)
    static = static_extents(mask, rank)
    dims = (None,) * rank if d.dims is None else \
        () if isinstance(d.dims, str) else tuple(d.dims)
    if len(dims) != rank or any(n is not None and not isinstance(n, str) for n in dims):
        raise ValueError(f"{w}: dims must be a name (str) or None per dim of "
                         f"the rank-{rank} operand, got {d.dims!r}")
    cap = _layout.class_cap(_layout.element_bits(ct, nbytes))
    for dim, s in enumerate(static):
        if s and not is_int(shape[dim]):
            raise ValueError(f"{w}: dim {dim} is symbolic ({shape[dim]}) and "
                             "cannot be static")
    div = _classes(d.extent_div, shape, static, rank, cap, w, "divisibility")
    order = _permutation(d.order, rank, f"{w}: layout") or tuple(range(rank - 1, -1, -1))
    mode = _permutation(d.mode, rank, f"{w}: mode")
    align = int(d.align)
    if align < 1 or align & (align - 1):
        raise ValueError(f"{w}: ptr_assumed_align must be a power of two, got {align}")
    static_shape = tuple(int(shape[k]) if static[k] else None for k in range(rank))
    strided = d.strides is not None
    static_stride, stride_div = (), ()
    if strided:
        strides = per_dim(d.strides, rank, f"{w}: strides", 0)
        fixed = static_strides(mask, rank)
        static_stride = tuple(
            (int(strides[k]) if shape[k] > 1 else 0) if fixed[k] else
            1 if k == d.unit_dim else None for k in range(rank))
        stride_div = _classes(d.stride_div, strides, [s is not None for s in static_stride],
                              rank, cap, w, "stride divisibility")
    return OperandSpec(
        name=d.name, source=d.source, index=d.index, cutlass_dtype=ct,
        elem_bytes=nbytes, rank=rank, static_shape=static_shape,
        divisibility=div, order=order, mode=mode, align=align,
        shape64=bool(d.wide) or needs_64bit_extents(shape, strided), strided=strided,
        static_stride=static_stride, dims=tuple(dims), tie=(-1,) * rank,
        stride_div=stride_div)


def needs_64bit_extents(shape, strided: bool) -> bool:
    """Whether an operand's extents must reach the kernel as Int64: an
    extent past Int32, or (for a compact operand, whose strides the kernel
    derives from its extents) an element offset past Int32. A strided
    operand's strides are Int64 already."""
    known = [int(e) for e in shape if is_int(e)]
    if any(e > INT32_MAX for e in known):
        return True
    return not strided and len(known) == len(shape) and math.prod(known) > INT32_MAX + 1


def tie_dims(operands: Sequence[OperandSpec], shapes, kernel: str | None = None
             ) -> tuple[list[OperandSpec], tuple[str, ...]]:
    """Resolves ``dims`` names across operands.

    A name whose extent is static anywhere becomes static everywhere; a name
    on two or more dynamic dims becomes a symbol: one runtime value, checked
    equal before every launch. Extents known at trace time are checked here.
    Returns the operands with ``tie`` set and the symbol names (index order).
    Errors name `kernel` and the operand, as the launch-time checks do.
    """
    groups: dict[str, list[tuple[int, int]]] = {}
    for i, op in enumerate(operands):
        for d, nm in enumerate(op.dims):
            if nm is not None:
                groups.setdefault(nm, []).append((i, d))
    static = {i: list(op.static_shape) for i, op in enumerate(operands)}
    tie = {i: list(op.tie) for i, op in enumerate(operands)}
    symbols: list[str] = []
    for nm, where in groups.items():
        (i0, d0) = where[0]
        first = shapes[i0][d0]
        for i, d in where[1:]:
            v = shapes[i][d]
            if is_int(v) and is_int(first) and v != first:
                prefix = f"cutecall: kernel '{kernel}'" if kernel else "cutecall"
                raise ValueError(
                    f"{prefix}: operand '{operands[i].name}' dim {d} = "
                    f"{v} must equal operand '{operands[i0].name}' dim {d0} = {first} "
                    f"(tied dim {nm!r})")
        if any(static[i][d] is not None for i, d in where):
            for i, d in where:
                op = operands[i]
                if not is_int(shapes[i][d]):
                    raise ValueError(f"{who(kernel, op.source, op.name)}: dim {nm!r} is "
                                     f"static in another operand but symbolic here")
                if shapes[i][d] % op.divisibility[d]:
                    raise ValueError(f"{who(kernel, op.source, op.name)}: dim {d} = "
                                     f"{shapes[i][d]} is not divisible by {op.divisibility[d]}")
                static[i][d] = int(shapes[i][d])
        elif len(where) > 1:
            for i, d in where:
                tie[i][d] = len(symbols)
            symbols.append(nm)
    out = [dataclasses.replace(op, static_shape=tuple(static[i]), tie=tuple(tie[i]))
           for i, op in enumerate(operands)]
    return out, tuple(symbols)
