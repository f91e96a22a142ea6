"""Launchers whose outputs are not the last tensors, for the tests of
``written_params`` (the outputs are found from what the kernel writes):

* ``out_first(stream, out, x, y)``: ``out = x + y``;
* ``out_last(stream, x, y, out)``: ``out = x + y``;
* ``out_between(stream, q, k, out, lse, index)``: ``out = q + k[index]``,
  ``lse = q - k[index]``; ``index`` is int32 (traced with a float array
  there, the gather fails: the rule's placement does not compile);
* ``out_before_optional(stream, x, y, loss, dX, labels=None)``:
  ``loss = x * y``, ``dX = x - labels`` (``dX = x`` without labels);
* ``named(stream, x, pair: Pair, out)``: ``out = pair.a * x + pair.b``
  where ``Pair`` is a NamedTuple the call passes as a plain tuple.

All 1-D float32 (``index``/``labels`` int32), any length, 128 threads a
block. The DSL re-parses kernel sources: they live in a real file.
"""

from typing import NamedTuple, Optional

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

_THREADS = 128


def _grid(n):
    return ((n + _THREADS - 1) // _THREADS, 1, 1)


def _index():
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    return bidx * _THREADS + tidx


@cute.kernel
def _add_kernel(out: cute.Tensor, x: cute.Tensor, y: cute.Tensor):
    i = _index()
    if i < out.shape[0]:
        out[i] = x[i] + y[i]


@cute.jit
def out_first(stream: cuda.CUstream, out: cute.Tensor, x: cute.Tensor, y: cute.Tensor):
    """``out = x + y``, the output first."""
    n = out.shape[0]
    if n > 0:
        _add_kernel(out, x, y).launch(grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.jit
def out_last(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor, out: cute.Tensor):
    """``out = x + y``, the output last."""
    n = out.shape[0]
    if n > 0:
        _add_kernel(out, x, y).launch(grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _between_kernel(q: cute.Tensor, k: cute.Tensor, out: cute.Tensor, lse: cute.Tensor,
                    index: cute.Tensor):
    i = _index()
    if i < out.shape[0]:
        g = k[index[i]]
        out[i] = q[i] + g
        lse[i] = q[i] - g


@cute.jit
def out_between(stream: cuda.CUstream, q: cute.Tensor, k: cute.Tensor, out: cute.Tensor,
                lse: cute.Tensor, index: cute.Tensor):
    """``out = q + k[index]``, ``lse = q - k[index]``: outputs between the
    inputs, as FA4's ``(q, k, v, out, lse, ...)``."""
    n = out.shape[0]
    if n > 0:
        _between_kernel(q, k, out, lse, index).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _loss_kernel(x: cute.Tensor, y: cute.Tensor, loss: cute.Tensor, dX: cute.Tensor,
                 labels: Optional[cute.Tensor], has_labels: cutlass.Constexpr):
    i = _index()
    if i < loss.shape[0]:
        loss[i] = x[i] * y[i]
        if cutlass.const_expr(has_labels):
            dX[i] = x[i] - labels[i].to(cutlass.Float32)
        else:
            dX[i] = x[i]


@cute.jit
def out_before_optional(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor,
                        loss: cute.Tensor, dX: cute.Tensor,
                        labels: Optional[cute.Tensor] = None):
    """``loss = x * y``, ``dX = x - labels``: outputs before an optional
    input, as a cross-entropy's ``(x, y, loss, dX, labels)``."""
    n = loss.shape[0]
    if n > 0:
        _loss_kernel(x, y, loss, dX, labels, labels is not None).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


class Pair(NamedTuple):
    a: cute.Tensor
    b: cute.Tensor


@cute.kernel
def _named_kernel(x: cute.Tensor, a: cute.Tensor, b: cute.Tensor, out: cute.Tensor):
    i = _index()
    if i < out.shape[0]:
        out[i] = a[i] * x[i] + b[i]


@cute.jit
def named(stream: cuda.CUstream, x: cute.Tensor, pair: Pair, out: cute.Tensor):
    """``out = pair.a * x + pair.b``; `pair` is read by field name, so the
    kernel needs the annotated NamedTuple, as FA4's ``BlockSparseTensors``."""
    n = out.shape[0]
    if n > 0:
        _named_kernel(x, pair.a, pair.b, out).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)
