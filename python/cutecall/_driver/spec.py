"""Operand specs, the launch plan encoding and the specialization key.

Pure Python, no CuTe DSL import: everything here runs on any machine.
The plan encoding is the C++ ``abi.h`` contract; the key is content only
(launcher source, operand spec, constexprs, options, arch, versions), never
object identity, and holds no dynamic extent: one compile serves all shapes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Callable

import numpy as np

from . import layout as _layout
from .fingerprint import fingerprint  # noqa: F401 (part of this API)

PLAN_VERSION = 3
SOURCE_ARG, SOURCE_RET = 0, 1
FLAG_SHAPE64, FLAG_STRIDED = 1, 2
MAX_RANK = 8

# numpy dtype name -> (CuTe DSL type name, bytes per element)
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


def cutlass_dtype(dtype, what: str) -> tuple[str, int]:
    name = np.dtype(dtype).name
    if name not in _DTYPES:
        raise TypeError(f"cutecall: {what} has dtype {name}, which cutecall "
                        f"does not map to a CuTe DSL type; supported: "
                        f"{', '.join(sorted(_DTYPES))}")
    return _DTYPES[name]


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """How one array operand reaches the kernel as a ``cute.Tensor``.

    Args:
      layout: CuTe stride order of the array in memory, ``layout[d]`` ranking
        dim ``d``'s stride (0 = fastest). ``None`` is row-major. XLA is asked
        for this physical layout, so no transpose is added by cutecall.
      mode: a permutation applied to the tensor's modes (a view, no copy).
      static: ``True`` bakes every extent into the kernel, or a tuple of bools
        per dim. Default: every dim is a runtime value (one compile serves
        every shape).
      divisibility: an int per dim (or one int for all) the kernel may assume
        divides that extent; checked before every launch. Default: derived
        from the extent at trace time -- its divisibility class, the largest
        power of two dividing it, capped at 16 bytes' worth of elements
        (``docs/abi.md``, layout specialization); every shape in a class
        shares one compile. ``divisibility=1`` assumes nothing.
      ptr_assumed_align: alignment in bytes the kernel may assume of the data
        pointer; checked before every launch. Default 16.
      dims: a name (or None) per dim. Dims of any operands that share a name
        are one runtime value: the kernel receives it once (so the compiler
        knows they are equal) and the extents are checked equal before every
        launch. cutecall's addition; NVIDIA's TensorSpec has no such field.
    """

    layout: tuple[int, ...] | None = None
    mode: tuple[int, ...] | None = None
    static: bool | tuple[bool, ...] | None = None
    divisibility: int | tuple[int, ...] | None = None
    ptr_assumed_align: int = 16
    dims: tuple[str | None, ...] | None = None


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


def _per_dim(value, rank: int, what: str, default):
    if value is None:
        return (default,) * rank
    if isinstance(value, (bool, int, np.integer)):
        return (value,) * rank
    value = tuple(value)
    if len(value) != rank:
        raise ValueError(f"{what} has {len(value)} entries for a "
                         f"rank-{rank} operand: {value!r}")
    return value


def with_static(spec: TensorSpec | None, mask: tuple) -> TensorSpec:
    """`spec` with the extents `mask` marks compiled in too (the static
    fallback, ``_fallback``)."""
    spec = spec or TensorSpec()
    if isinstance(spec.static, bool) or spec.static is None:
        given = (bool(spec.static),) * len(mask)
    else:
        given = tuple(spec.static)
    return dataclasses.replace(
        spec, static=tuple(a or b for a, b in zip(given, mask)))


def _who(kernel: str | None, source: int, name: str) -> str:
    """How errors name an operand, as the launch-time checks do."""
    side = "input" if source == SOURCE_ARG else "output"
    return f"cutecall: kernel '{kernel}', {side} '{name}'" if kernel else f"cutecall: {name}"


def make_operand(name: str, source: int, index: int, shape, dtype,
                 spec: TensorSpec | None, static_default: bool = False,
                 kernel: str | None = None) -> OperandSpec:
    """One operand's spec; errors name the operand (and `kernel`)."""
    who = _who(kernel, source, name)
    spec = spec or TensorSpec(static=static_default or None)
    if not isinstance(spec, TensorSpec):
        raise TypeError(f"{who}: its spec must be a cutecall."
                        f"TensorSpec, got {type(spec).__name__}: {spec!r}")
    shape = tuple(shape)
    rank = len(shape)
    if rank == 0:
        raise ValueError(f"{who} is rank 0; pass a shape-(1,) array "
                         "(rank-0 tensors are not supported)")
    if rank > MAX_RANK:
        raise ValueError(f"{who} has rank {rank} > {MAX_RANK}")
    ct, nbytes = cutlass_dtype(dtype, name)
    static = _per_dim(static_default if spec.static is None else spec.static,
                      rank, f"{who}: static", False)
    dims = (None,) * rank if spec.dims is None else \
        () if isinstance(spec.dims, str) else tuple(spec.dims)
    if len(dims) != rank or \
            any(d is not None and not isinstance(d, str) for d in dims):
        raise ValueError(f"{who}: dims must be a name (str) or None "
                         f"per dim of the rank-{rank} operand, got {spec.dims!r}")
    if spec.divisibility is None:
        div = _layout.extent_classes(
            shape, static, _layout.class_cap(_layout.element_bits(ct, nbytes)))
    else:
        div = tuple(int(d) for d in _per_dim(spec.divisibility, rank,
                                             f"{who}: divisibility", 1))
    for d, v in enumerate(div):
        if v < 1:
            raise ValueError(f"{who}: divisibility of dim {d} must "
                             f"be >= 1, got {v}")
    order = tuple(range(rank - 1, -1, -1)) if spec.layout is None \
        else tuple(int(x) for x in spec.layout)
    if sorted(order) != list(range(rank)):
        raise ValueError(f"{who}: layout {spec.layout!r} is not a "
                         f"permutation of 0..{rank - 1}")
    if spec.mode is not None and sorted(spec.mode) != list(range(rank)):
        raise ValueError(f"{who}: mode {spec.mode!r} is not a "
                         f"permutation of 0..{rank - 1}")
    align = int(spec.ptr_assumed_align)
    if align < 1 or align & (align - 1):
        raise ValueError(f"{who}: ptr_assumed_align must be a power "
                         f"of two, got {align}")
    static_shape = []
    for d in range(rank):
        # A known extent off its declared divisibility fails here, at trace
        # time, not at the first launch.
        if isinstance(shape[d], (int, np.integer)) and shape[d] % div[d]:
            raise ValueError(f"{who}: dim {d} = {shape[d]} is "
                             f"not divisible by {div[d]}")
        if static[d]:
            if not isinstance(shape[d], (int, np.integer)):
                raise ValueError(f"{who}: dim {d} is symbolic "
                                 f"({shape[d]}) and cannot be static")
            static_shape.append(int(shape[d]))
        else:
            static_shape.append(None)
    return OperandSpec(name=name, source=source, index=index, cutlass_dtype=ct,
                       elem_bytes=nbytes, rank=rank,
                       static_shape=tuple(static_shape), divisibility=div,
                       order=order,
                       mode=None if spec.mode is None else tuple(spec.mode),
                       align=align, dims=tuple(dims), tie=(-1,) * rank)


def tie_dims(operands, shapes, kernel: str | None = None
             ) -> tuple[list[OperandSpec], tuple[str, ...]]:
    """Resolves ``TensorSpec.dims`` names across operands.

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
            if isinstance(v, (int, np.integer)) and \
                    isinstance(first, (int, np.integer)) and v != first:
                prefix = f"cutecall: kernel '{kernel}'" if kernel else "cutecall"
                raise ValueError(
                    f"{prefix}: operand '{operands[i].name}' dim {d} = "
                    f"{v} must equal operand '{operands[i0].name}' dim {d0} = {first} "
                    f"(tied dim {nm!r})")
        if any(static[i][d] is not None for i, d in where):
            for i, d in where:
                op = operands[i]
                if not isinstance(shapes[i][d], (int, np.integer)):
                    raise ValueError(f"{_who(kernel, op.source, op.name)}: dim {nm!r} is "
                                     f"static in another operand but symbolic here")
                if shapes[i][d] % op.divisibility[d]:
                    raise ValueError(f"{_who(kernel, op.source, op.name)}: dim {d} = "
                                     f"{shapes[i][d]} is not divisible by {op.divisibility[d]}")
                static[i][d] = int(shapes[i][d])
        elif len(where) > 1:
            for i, d in where:
                tie[i][d] = len(symbols)
            symbols.append(nm)
    out = [dataclasses.replace(op, static_shape=tuple(static[i]),
                               tie=tuple(tie[i]))
           for i, op in enumerate(operands)]
    return out, tuple(symbols)


def xla_layout(op: OperandSpec) -> tuple[int, ...]:
    """XLA minor-to-major for the operand's CuTe stride order."""
    return tuple(sorted(range(op.rank), key=lambda d: op.order[d]))


def encode_plan(operands, num_args: int, num_rets: int,
                num_scalars: int = 0) -> np.ndarray:
    """The int64 launch plan of abi.h, version 3 (docs/abi.md)."""
    out = [PLAN_VERSION, num_args, num_rets, len(operands), num_scalars]
    for op in operands:
        flags = (FLAG_SHAPE64 if op.shape64 else 0) | \
                (FLAG_STRIDED if op.strided else 0)
        out += [op.source, op.index, op.rank, op.elem_bytes, op.align, flags]
        statics = [(d, v) for d, v in enumerate(op.static_shape) if v is not None]
        tie = op.tie or (-1,) * op.rank
        dyn = [(d, op.divisibility[d], tie[d])
               for d, v in enumerate(op.static_shape) if v is None]
        out.append(len(statics))
        for d, v in statics:
            out += [d, v]
        out.append(len(dyn))
        for entry in dyn:
            out += list(entry)
        stride_div = op.stride_div or (1,) * op.rank
        dyn_stride = [] if not op.strided else \
            [(d, stride_div[d]) for d, v in enumerate(op.static_stride)
             if v is None]
        out.append(len(dyn_stride))
        for d, v in dyn_stride:
            out += [d, v]
        # Version 3: static strides other than the unit stride (a strided
        # operand's dims named nowhere have stride 1).
        static_stride = [] if not op.strided else \
            [(d, v) for d, v in enumerate(op.static_stride)
             if v is not None and v != 1]
        out.append(len(static_stride))
        for d, v in static_stride:
            out += [d, v]
    return np.asarray(out, dtype=np.int64)


def decode_plan(plan) -> list[dict]:
    """The operands of an encoded plan (any version): per operand
    ``source, index, rank, elem_bytes, align, flags``, ``static`` [(dim,
    extent)], ``dynamic`` [(dim, divisibility, symbol)], ``dyn_stride``
    [(dim, divisibility)], ``static_stride`` [(dim, stride)]. The C++
    parser validates; this only reads (bundles' manifests, tests)."""
    version, pos, out = plan[0], 5, []
    for _ in range(plan[3]):
        op = dict(zip(("source", "index", "rank", "elem_bytes", "align",
                       "flags"), plan[pos:pos + 6]))
        pos += 6
        for field, width in (("static", 2), ("dynamic", 3 if version >= 2
                                               else 2), ("dyn_stride", 2),
                             ("static_stride", 2 if version >= 3 else 0)):
            if width == 0:
                op[field] = []
                continue
            n = plan[pos]
            op[field] = [tuple(plan[pos + 1 + width * j:pos + 1 + width * (j + 1)])
                         for j in range(n)]
            pos += 1 + width * n
        out.append(op)
    return out


def specialization_key(launcher: Callable, operands, input_tree: str,
                       output_tree: str, constexprs, compile_options,
                       arch: str, versions: dict, extra=None) -> str:
    """`launcher`: the launcher, or its fingerprint (a list, taken once when
    a front end binds it: a kernel object's attributes may change while it
    is traced). `extra`: any further JSON-able content (the call binding,
    scalar types, tied-dim symbols, a user compile_key)."""
    doc = {
        "extra": extra,
        "launcher": launcher if isinstance(launcher, list)
        else fingerprint(launcher, "launcher"),
        "operands": [op.key() for op in operands],
        "trees": [input_tree, output_tree],
        "constexprs": [[k, fingerprint(v, f"constexpr {k!r}")]
                       for k, v in constexprs],
        "options": compile_options or "",
        "arch": arch,
        "versions": versions,
        "plan": PLAN_VERSION,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
