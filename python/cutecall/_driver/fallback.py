"""Static fallback: the smallest set of extents to compile in when the DSL
rejects a kernel's dynamic layouts.

Some kernels do not compile with dynamic extents: they assert on an extent
at trace time (QuACK's rotary: ``assert mCos.shape[1] * 2 == self.dim``),
branch on one (``const_expr(shape[1] == tile_n)``), ``.load()`` a whole
tensor (``dynamic layout doesn't support load``) or do layout algebra that
needs static shapes. Their authors compile them with the extents the kernel
object is parameterized by baked in -- QuACK's ``N``, FA4's ``h`` and ``d``
-- and NVIDIA's ``cutlass_call`` bakes every extent in by default.

cutecall keeps as much dynamic as the kernel allows. After a form fails:

1. **guided**: the failing source line names the extents or strides it
   reads (``mCos.shape[1]``, ``x.stride[0]``): exactly those of those
   operands are compiled in next, and again for the next failure, while
   that finds new ones;
2. **searched**: otherwise the candidates, smallest first -- one quantity at
   a time (every dim of every operand with that extent: QuACK's ``N`` in
   ``x``, ``out`` and ``weight``), innermost first; then the innermost k
   dims of the highest-rank operands; then every extent and stride
   (NVIDIA's default).

A form is one :data:`~operand.StaticMask` per operand, the form the C++
launcher keys calls by. Here: the forms (:func:`guided`, :func:`search`),
what a form compiles in (:func:`summary`, :func:`static_parts`: what a
front's hint spells) and whether the fallback is on (:func:`enabled`);
``fallback_climb`` compiles (or traces) them in turn. Pure Python.
"""

from __future__ import annotations

import os
import re
from typing import Sequence

from .compile_error import CompileError
from .operand import EVERYTHING, STRIDE_SHIFT, is_int, static_extents

ENV = "CUTECALL_STATIC_FALLBACK"
_SHAPE_READ = re.compile(r"\b([A-Za-z_][\w.]*?)\.(shape|stride)\s*(?:\[\s*(-?\d+)\s*\])?")


def check_option(option) -> bool | None:
    """Validates a front's ``static_fallback=`` argument."""
    if option is not None and not isinstance(option, bool):
        raise TypeError(f"cutecall: static_fallback must be a bool or None, "
                        f"got {option!r}")
    return option


def enabled(option: bool | None) -> bool:
    """`option` if given, else ``$CUTECALL_STATIC_FALLBACK`` (default on;
    ``0``/``false``/``off`` turn the fallback into an error)."""
    if option is not None:
        return bool(option)
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def search(shapes: Sequence[Sequence]) -> list[tuple]:
    """The searched forms for operands of `shapes` (ints are concrete; other
    dims are never made static), smallest first: one extent value at a time
    (innermost first), the innermost k dims of the highest-rank operands,
    then everything."""
    max_rank = max((len(s) for s in shapes), default=0)
    distance: dict[int, int] = {}  # a value's distance from an innermost dim
    top: dict[int, int] = {}       # ... of the highest-rank operands
    for s in shapes:
        for d, v in enumerate(s):
            if is_int(v):
                distance[v] = min(distance.get(v, max_rank), len(s) - 1 - d)
                if len(s) == max_rank:
                    top[v] = min(top.get(v, max_rank), max_rank - 1 - d)

    def masks(values) -> tuple:
        return tuple(sum(1 << d for d, v in enumerate(s) if is_int(v) and v in values)
                     for s in shapes)
    out = [masks({v}) for v in sorted(distance, key=lambda v: (distance[v], -v))]
    out += [masks({v for v, dist in top.items() if dist < k}) for k in range(2, max_rank)]
    out.append((EVERYTHING,) * len(shapes))
    seen, unique = set(), []
    for m in out:
        if any(m) and m not in seen:
            seen.add(m)
            unique.append(m)
    return unique


def guided(error: CompileError, names: Sequence[str], ranks: Sequence[int]) -> tuple:
    """Per operand, the extents and strides the failing source line reads
    (``mCos.shape[1]``, ``x.stride[0]``; ``x.shape`` is every extent of x),
    matched to operand names (``epilogue.mC`` matches ``mC``)."""
    found = [0] * len(names)
    for m in _SHAPE_READ.finditer(getattr(error, "source_line", "") or ""):
        word, what, dim = m.group(1).rsplit(".", 1)[-1], m.group(2), m.group(3)
        shift = STRIDE_SHIFT if what == "stride" else 0
        for i, nm in enumerate(names):
            if nm == word or nm.endswith("." + word):
                if dim is None:
                    found[i] |= ((1 << ranks[i]) - 1) << shift
                elif -ranks[i] <= int(dim) < ranks[i]:
                    found[i] |= 1 << (int(dim) % ranks[i] + shift)
    return tuple(found)


def summary(masks: Sequence[int], names: Sequence[str], shapes: Sequence) -> str:
    """What a form compiles in, dim by dim: ``static extents 64 (mCos dim 1,
    mSin dim 1), the rest dynamic``."""
    if masks and all(m == EVERYTHING for m in masks):
        return "every extent (and stride) static"
    by_value: dict = {}
    for i, (m, s) in enumerate(zip(masks, shapes)):
        for d, on in enumerate(static_extents(m, len(s))):
            if on:
                by_value.setdefault(s[d], []).append(f"{names[i]} dim {d}")
    parts = [f"{v} ({', '.join(w)})" for v, w in
             sorted(by_value.items(), key=lambda kv: -kv[0] if is_int(kv[0]) else 0)]
    return "static extents " + "; ".join(parts) + ", the rest dynamic"


def static_parts(masks: Sequence[int], operands: Sequence) -> list[tuple]:
    """Per operand, its extents compiled in by `masks` (a bool per dim):
    what a front's hint (``Launcher(hint=)``) spells in its users' words."""
    return [static_extents(m, len(op.shape)) for m, op in zip(masks, operands)]
