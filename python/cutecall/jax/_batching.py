"""``jax.vmap`` of cutecall kernels: fold the batch into a kernel mode, or loop.

A kernel declares, with ``cutlass_call(..., batch_modes=...)``, which dim of
each array can carry a batch: running it on arrays whose declared dim is the
concatenation of B examples gives outputs whose declared dim is the
concatenation of the B results (true of elementwise kernels on any dim, of
row-wise kernels on the row dim, of a GEMM on the M dim of A and C). Under
``vmap`` the batch is then folded into that dim -- a reshape, which for a
row-major array whose batch sits just outside that dim is a bitcast -- and
the kernel runs once. Without a declaration (or when a fold is impossible)
the kernel runs once per example, with a one-time warning saying how to opt
in. Folds nest: ``vmap(vmap(f))`` folds twice into the same dim.

Owns: the batching rule of ``cutecall_p`` and the set of kernels already
warned about (bounded by the number of distinct kernels).
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from typing import Sequence

import jax
import jax.numpy as jnp
from jax import lax

from .._driver.user_frames import user_stacklevel

__all__ = ["BatchModes", "BatchPlan", "VmapFallbackWarning", "resolve",
           "batch_rule", "UNROLL_MAX"]

# Batches up to this size run as unrolled calls (XLA captures them in one
# command buffer); larger ones as a lax.map loop (one call in the HLO).
UNROLL_MAX = 32

LOOP = "loop"


class VmapFallbackWarning(UserWarning):
    """``vmap`` of a cutecall kernel runs it once per batch element."""


@dataclasses.dataclass(frozen=True)
class BatchModes:
    """Which dim of each array carries a ``vmap`` batch (``batch_modes=``).

    The declaration is a promise about the kernel: run on arrays whose dim
    ``inputs[k]`` holds B examples one after another, it writes outputs
    whose dim ``outputs[j]`` holds the B results one after another. Then
    ``jax.vmap`` folds the batch into those dims and launches once.

    Args:
      inputs: per array argument (flattened leaves, in call order) the dim
        that carries the batch, or ``None`` for an array the kernel must see
        whole (e.g. a bias or a weight shared by all examples: if it is
        batched, vmap falls back to a loop). One int applies to every array.
        Dims index the array as passed (before ``TensorSpec.mode``).
      outputs: per output leaf the dim that carries the batch; one int
        applies to every output.

    Example::

        # out[m] = sum_n x[m, n]: rows are independent, fold into dim 0.
        row_sum = cutecall.cutlass_call(kernels.row_sum, output_shape_dtype=...,
                                        batch_modes=cutecall.BatchModes(0, 0))
        jax.vmap(row_sum)(xs)   # xs: (B, M, N) -> one launch on (B*M, N)

    ``batch_modes=0`` is short for ``BatchModes(0, 0)`` (elementwise
    kernels); ``batch_modes="loop"`` asks for the per-example loop without
    the warning.
    """

    inputs: int | None | Sequence[int | None] = 0
    outputs: int | Sequence[int] = 0


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """A call site's resolved declaration (a primitive parameter; hashable).

    ``inputs``/``outputs``: a dim per flat input / output (None: whole).
    ``reason``: why this call site cannot fold (None when it can);
    ``explicit_loop``: the user asked for the loop (no warning).
    """

    inputs: tuple
    outputs: tuple
    reason: str | None = None
    explicit_loop: bool = False


def check_batch_modes(batch_modes):
    """Validates ``cutlass_call(batch_modes=...)`` at construction."""
    if batch_modes is None or batch_modes == LOOP:
        return batch_modes
    if isinstance(batch_modes, int) and not isinstance(batch_modes, bool):
        batch_modes = BatchModes(batch_modes, batch_modes)
    if not isinstance(batch_modes, BatchModes):
        raise TypeError("cutecall: batch_modes must be a cutecall.BatchModes, "
                        "an int (the dim of every array and output), 'loop' or "
                        f"None, got {type(batch_modes).__name__}: {batch_modes!r}")
    for what, v, none_ok in (("inputs", batch_modes.inputs, True),
                             ("outputs", batch_modes.outputs, False)):
        items = v if isinstance(v, (list, tuple)) else (v,)
        for d in items:
            ok = (d is None and none_ok) or (
                isinstance(d, int) and not isinstance(d, bool) and d >= 0)
            if not ok:
                raise TypeError(f"cutecall: batch_modes {what} entries must be "
                                f"dims (ints >= 0){' or None' if none_ok else ''}"
                                f", got {d!r} in {batch_modes!r}")
    return batch_modes


def _per_leaf(value, n: int, what: str, name: str) -> tuple:
    if not isinstance(value, (list, tuple)):
        return (value,) * n
    if len(value) != n:
        raise ValueError(f"cutecall: batch_modes {what} of '{name}' has "
                         f"{len(value)} entries for {n} arrays: {value!r}")
    return tuple(value)


def resolve(batch_modes, name: str, operands, in_shapes, out_shapes,
            aliases) -> BatchPlan | None:
    """The call site's :class:`BatchPlan` (None: no declaration).

    `operands`: the compiled ``OperandSpec``s (``source``/``index`` name
    the XLA operand or result; aliased outputs have none); `aliases`: flat
    (input, output) pairs. Errors in the declaration raise here, at trace
    time; reasons a fold cannot happen become ``BatchPlan.reason``.
    """
    if batch_modes is None:
        return None
    n_in, n_out = len(in_shapes), len(out_shapes)
    if batch_modes == LOOP:
        return BatchPlan((None,) * n_in, (None,) * n_out, "batch_modes='loop'",
                         explicit_loop=True)
    ins = _per_leaf(batch_modes.inputs, n_in, "inputs", name)
    outs = _per_leaf(batch_modes.outputs, n_out, "outputs", name)
    for what, modes, shapes in (("input", ins, in_shapes),
                                ("output", outs, out_shapes)):
        for k, (m, s) in enumerate(zip(modes, shapes)):
            if m is not None and m >= len(s):
                raise ValueError(f"cutecall: batch_modes gives dim {m} for "
                                 f"{what} {k} of '{name}', which has rank "
                                 f"{len(s)} (shape {tuple(s)})")
    reason = None
    for a, b in aliases:
        if ins[a] != outs[b]:
            reason = (f"input {a} aliases output {b} but their batch dims "
                      f"differ ({ins[a]} vs {outs[b]})")
    folded = {}  # (source, index) -> dim
    for op in operands:
        m = (ins if op.source == 0 else outs)[op.index]
        if m is None:
            continue
        folded[(op.source, op.index)] = m
        if op.static_shape[m] is not None:
            reason = reason or (
                f"{op.name} dim {m} is static ({op.static_shape[m]}) in the "
                "compiled kernel; a fold changes its extent (make it dynamic: "
                "TensorSpec(static=...) False for that dim)")
    ties: dict[int, set] = {}
    for op in operands:
        for d, t in enumerate(op.tie):
            if t >= 0:
                ties.setdefault(t, set()).add(
                    folded.get((op.source, op.index)) == d)
    if any(len(v) > 1 for v in ties.values()):
        reason = reason or ("a tied dim (TensorSpec.dims) is folded in some "
                            "operands and not in others")
    return BatchPlan(ins, outs, reason)


# ---------------------------------------------------------------------------
# The rule

_warned: set = set()
_warned_lock = threading.Lock()


def _warn_once(kernel, why: str, size: int) -> None:
    key = (kernel.key, why)
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    how = "unrolled calls" if size <= UNROLL_MAX else "a lax.map loop"
    warnings.warn(
        f"cutecall: jax.vmap of kernel '{kernel.name}' runs it once per batch "
        f"element ({size} launches, as {how}): {why}. To launch it once on "
        "the whole batch, declare which dim of each array carries the batch: "
        "cutlass_call(..., batch_modes=cutecall.BatchModes(inputs=..., "
        "outputs=...)) (see docs/transforms.md); to keep the loop without "
        "this warning, pass batch_modes='loop'.",
        VmapFallbackWarning, stacklevel=user_stacklevel())


def _fold_reason(plan: BatchPlan | None, dims) -> str | None:
    if plan is None:
        return "its cutlass_call declares no batch_modes"
    if plan.reason is not None:
        return plan.reason
    for k, (d, m) in enumerate(zip(dims, plan.inputs)):
        if d is not None and m is None:
            return (f"input {k} is batched but batch_modes declares it whole "
                    "(None)")
    if any(m is None for m in plan.outputs):
        return "an output declares no batch dim"
    return None


def _fold(prim, size, args, dims, plan: BatchPlan, out_avals, params):
    folded = []
    for x, d, m in zip(args, dims, plan.inputs):
        if m is None:
            folded.append(x)  # shared by every example: passed once, no copy
            continue
        if d is None:
            # The kernel reads the batch from this array's dim m, so each
            # example needs its own copy: XLA buffers are dense (no stride-0
            # dims reach a kernel).
            x, d = jnp.broadcast_to(x[None], (size,) + tuple(x.shape)), 0
        x = jnp.moveaxis(x, d, m)
        s = x.shape
        folded.append(x.reshape(s[:m] + (s[m] * s[m + 1],) + s[m + 2:]))
    new_avals = tuple(
        a.update(shape=a.shape[:m] + (size * a.shape[m],) + a.shape[m + 1:])
        for a, m in zip(out_avals, plan.outputs))
    outs = prim.bind(*folded, **params, out_avals=new_avals)
    outs = [o.reshape(a.shape[:m] + (size, a.shape[m]) + a.shape[m + 1:])
            for o, a, m in zip(outs, out_avals, plan.outputs)]
    return outs, list(plan.outputs)


def _loop(prim, size, args, dims, out_avals, params):
    params = dict(params, out_avals=out_avals)
    if size <= UNROLL_MAX:
        per_example = []
        for b in range(size):
            xs = [x if d is None else lax.index_in_dim(x, b, d, keepdims=False)
                  for x, d in zip(args, dims)]
            per_example.append(prim.bind(*xs, **params))
        outs = [jnp.stack(col) for col in zip(*per_example)]
    else:
        batched = [jnp.moveaxis(x, d, 0) for x, d in zip(args, dims)
                   if d is not None]

        def one(xs):
            it = iter(xs)
            return prim.bind(*[x if d is None else next(it)
                               for x, d in zip(args, dims)], **params)

        outs = lax.map(one, batched)
    return list(outs), [0] * len(outs)


def batch_rule(prim, axis_data, args, dims, *, out_avals, batch=None,
               **params):
    """``cutecall_p``'s batching rule (``fancy_primitive_batchers``)."""
    params = dict(params, batch=batch)
    if all(d is None for d in dims):
        return prim.bind(*args, **params, out_avals=out_avals), \
            [None] * len(out_avals)
    size = axis_data.size
    why = _fold_reason(batch, dims)
    if why is None:
        return _fold(prim, size, args, dims, batch, out_avals, params)
    if batch is None or not batch.explicit_loop:
        _warn_once(params["kernel"], why, size)
    return _loop(prim, size, args, dims, out_avals, params)
