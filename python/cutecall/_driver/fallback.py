"""Static fallback: what to compile in when the DSL rejects dynamic layouts.

Some kernels do not compile with dynamic extents: they branch on an extent
at trace time (``const_expr(shape[1] == tile_n)``), ``.load()`` a whole
tensor (``dynamic layout doesn't support load``) or do layout algebra that
needs static shapes. Their authors compile them with the extents the
kernel object is parameterized by baked in -- QuACK's ``(batch, N)`` with
``N`` static, FA4's ``(b, s, h, d)`` with ``h`` and ``d`` static -- and
NVIDIA's ``cutlass_call`` bakes every extent in by default.

cutecall climbs a ladder, keeping as much dynamic as the kernel allows:

1. the innermost dim of the highest-rank operands static, then the
   innermost two, and so on. A dim is static together with every dim of
   every operand that has the same extent (the same quantity: QuACK's
   ``N`` in ``x``, ``out`` and ``weight``), so ``(M, N)`` rows with an
   ``(N,)`` weight and an ``(M,)`` statistic keep ``M`` dynamic;
2. every extent static (and, for strided torch operands, every stride):
   NVIDIA's default.

The first rung the DSL accepts is used; the fronts remember it per kernel,
so later shapes start there. Pure Python, no CuTe DSL import.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class Rung:
    """One way to compile a call: which (operand, dim) extents are static,
    whether strides are static too, and what to tell the user."""

    level: int
    static_dims: frozenset          # {(operand index, dim)}
    static_strides: bool
    summary: str                    # e.g. "N = 4096 static (x dim 1, w dim 0)"


def ladder(names: Sequence[str], shapes: Sequence[Sequence]) -> list[Rung]:
    """The rungs above the dynamic form for operands `names` of `shapes`
    (concrete ints; other dims are never made static), lowest first."""
    concrete = [[isinstance(v, int) for v in s] for s in shapes]
    max_rank = max((len(s) for s in shapes), default=0)
    # Distance from the innermost dim, measured on the highest-rank operands.
    distance: dict[int, int] = {}
    for s, known in zip(shapes, concrete):
        if len(s) != max_rank:
            continue
        for d, v in enumerate(s):
            if known[d]:
                distance[v] = min(distance.get(v, max_rank), max_rank - 1 - d)
    rungs, seen = [], set()
    for k in range(1, max_rank):
        values = {v for v, dist in distance.items() if dist < k}
        dims = frozenset((i, d) for i, s in enumerate(shapes)
                         for d, v in enumerate(s)
                         if concrete[i][d] and v in values)
        if dims and dims not in seen:
            seen.add(dims)
            rungs.append(Rung(len(rungs) + 1, dims, False,
                              _summary(names, shapes, dims, values)))
    every = frozenset((i, d) for i, s in enumerate(shapes)
                      for d in range(len(s)) if concrete[i][d])
    rungs.append(Rung(len(rungs) + 1, every, True,
                      "every extent (and stride) static"))
    return rungs


def _summary(names, shapes, dims, values) -> str:
    parts = []
    for v in sorted(values, reverse=True):
        where = [f"{names[i]} dim {d}" for i, d in sorted(dims)
                 if shapes[i][d] == v]
        if where:
            parts.append(f"{v} ({', '.join(where)})")
    return "static extents " + "; ".join(parts) + ", the rest dynamic"


def static_mask(rung: Rung | None, operand: int, rank: int) -> tuple:
    """Per dim of `operand`: whether `rung` compiles its extent in."""
    if rung is None:
        return (False,) * rank
    return tuple((operand, d) in rung.static_dims for d in range(rank))
