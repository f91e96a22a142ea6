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
2. every extent static (and, for strided operands, every stride):
   NVIDIA's default.

A rung is one :data:`~operand.StaticMask` per operand, the form the C++
launcher keys calls by. :func:`climb` compiles the first rung the DSL
accepts, warns once per kernel with the front's way of asking for it
(:func:`explicit_hint`), and records rejections for later processes.
No framework; the CuTe DSL only through ``compile_cache``.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any, Callable, Sequence

from . import compile_cache, kernel_cache
from .compile_error import CompileError, StaticFallbackWarning, user_stacklevel
from .log import logger
from .operand import EVERYTHING, SOURCE_ARG, is_int, static_extents

ENV = "CUTECALL_STATIC_FALLBACK"


@dataclasses.dataclass(frozen=True)
class Rung:
    """One way to compile a call: a static mask per operand, and what to
    tell the user."""

    level: int
    masks: tuple          # StaticMask per operand
    summary: str          # e.g. "static extents 4096 (x dim 1, w dim 0), ..."

    @property
    def everything(self) -> bool:
        return all(m == EVERYTHING for m in self.masks)


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


def ladder(names: Sequence[str], shapes: Sequence[Sequence]) -> list[Rung]:
    """The rungs above the dynamic form for operands `names` of `shapes`
    (ints are concrete; other dims are never made static), lowest first."""
    max_rank = max((len(s) for s in shapes), default=0)
    # Distance from the innermost dim, measured on the highest-rank operands.
    distance: dict[int, int] = {}
    for s in shapes:
        if len(s) == max_rank:
            for d, v in enumerate(s):
                if is_int(v):
                    distance[v] = min(distance.get(v, max_rank), max_rank - 1 - d)
    rungs, seen = [], set()
    for k in range(1, max_rank):
        values = {v for v, dist in distance.items() if dist < k}
        masks = tuple(sum(1 << d for d, v in enumerate(s) if is_int(v) and v in values)
                      for s in shapes)
        if any(masks) and masks not in seen:
            seen.add(masks)
            rungs.append(Rung(len(rungs) + 1, masks, _summary(names, shapes, values)))
    rungs.append(Rung(len(rungs) + 1, (EVERYTHING,) * len(shapes),
                      "every extent (and stride) static"))
    return rungs


def _summary(names, shapes, values) -> str:
    parts = []
    for v in sorted(values, reverse=True):
        where = [f"{names[i]} dim {d}" for i, s in enumerate(shapes)
                 for d, x in enumerate(s) if is_int(x) and x == v]
        if where:
            parts.append(f"{v} ({', '.join(where)})")
    return "static extents " + "; ".join(parts) + ", the rest dynamic"


def explicit_hint(style: str, rung: Rung, operands: Sequence) -> str:
    """How a user asks for `rung` explicitly, in the front's words:
    ``"cutlass_call"`` (``input_spec``/``output_spec``), ``"torch"``
    (``kernel(static=...)``) or ``"helion"`` (no such option). `operands`
    have ``name``, ``source`` and ``shape``."""
    ranks = [len(op.shape) for op in operands]
    extents = [static_extents(m, r) for m, r in zip(rung.masks, ranks)]
    if style == "helion":
        return "nothing (Helion's launcher compiles what the kernel needs)"
    if style == "torch":
        if rung.everything:
            return "cutecall.torch.kernel(..., static=True)"
        parts = [f"{op.name!r}: {True if all(e) else e}"
                 for op, e in zip(operands, extents) if any(e)]
        return "cutecall.torch.kernel(..., static={" + ", ".join(parts) + "})"
    if all(all(e) for e in extents):
        return "cutlass_call(..., use_static_tensors=True)"

    def spec(e):
        return "None" if not any(e) else "TensorSpec(static=True)" if all(e) \
            else f"TensorSpec(static={e})"
    sides = {side: [spec(e) for op, e in zip(operands, extents)
                    if (op.source == SOURCE_ARG) == (side == "input_spec")]
             for side in ("input_spec", "output_spec")}
    parts = [f"{side}=({', '.join(s)},)" for side, s in sides.items() if s]
    return f"cutlass_call(..., {', '.join(parts)})"


def climb(build: Callable[[Rung | None], Any], rungs: list, start: int, name: str,
          options: str, arch: str, fallback: bool | None,
          explicit: Callable[[Rung], str]) -> tuple:
    """Compiles the first form of a call the DSL accepts: ``build(None)``
    (dynamic layouts), then ``build(rung)`` for each rung of `rungs`, from
    level `start` (what worked last time; 0 = dynamic). `build` returns a
    :class:`KernelSpec`. Returns (kernel, spec, level).

    Climbing warns once per kernel with :class:`StaticFallbackWarning`,
    naming the rung and ``explicit(rung)``; with ``fallback=False`` (or
    ``$CUTECALL_STATIC_FALLBACK=0``) the dynamic form's ``CompileError`` is
    raised instead. Rejected keys are remembered for the process and
    recorded in the artifact store: each fails once per user and version.
    """
    allowed = enabled(fallback)
    first_error, seen, cause = None, set(), "rejected earlier in the process"
    start = start if allowed else 0
    cache = compile_cache
    for level in range(start, len(rungs) + 1 if allowed else 1):
        rung = rungs[level - 1] if level else None
        spec = build(rung)
        if spec.key in seen:
            continue
        seen.add(spec.key)
        with cache.lock:
            cached = cache.cached(spec.key)
            stored = None if cached or cache.is_rejected(spec.key) or \
                level == len(rungs) or not allowed \
                else kernel_cache.rejection_cause(spec.key, arch)
            if stored is not None:
                cause = f"{stored} (recorded by an earlier process)"
            if cache.is_rejected(spec.key) or stored is not None:
                cache.remember_rejection(spec.key, name)
                continue
            try:
                kernel = cache.get_locked(spec, name, options, arch)
            except CompileError as e:
                logger.info("kernel '%s' rejected a form for %s: %s", name, arch,
                            e.root_cause)
                first_error = first_error or e
                cache.remember_rejection(spec.key, name)
                if level < len(rungs) and allowed:
                    kernel_cache.record_rejection(spec.key, name, arch, e.root_cause)
                continue
            if level and not cached:
                cache.count_fallback()
                logger.info("kernel '%s': static fallback, compiled with %s (%s)",
                            name, rung.summary,
                            first_error.root_cause if first_error else cause)
            warn = level > 0 and name not in cache.warned
            if warn:
                cache.warned.add(name)
        if warn:
            cause = first_error.root_cause if first_error else cause
            warnings.warn(
                f"cutecall: kernel '{name}' does not compile with dynamic "
                f"layouts ({cause}); compiled with {rung.summary}, as its "
                f"authors' launch path or NVIDIA's cutlass_call would. To ask "
                f"for this explicitly: {explicit(rung)}. To make it an error: "
                f"static_fallback=False or {ENV}=0.",
                StaticFallbackWarning, stacklevel=user_stacklevel())
        return kernel, spec, level
    if first_error is None:  # every form was rejected earlier in the process
        spec = build(None)
        with cache.lock:
            cache.forget_rejection(spec.key)
            kernel = cache.get_locked(spec, name, options, arch)  # raises again
        return kernel, spec, 0
    if allowed and len(rungs):
        raise CompileError(
            f"{first_error}\n(no static form compiled either; the fully "
            f"static one is tried last)", kernel=name, arch=arch,
            root_cause=first_error.root_cause,
            dsl_message=first_error.dsl_message) from first_error
    raise first_error
