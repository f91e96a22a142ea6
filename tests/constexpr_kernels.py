"""Launchers with ``cutlass.Constexpr`` parameters where their authors pass
them positionally (``cute.compile(launcher, *args)``), for the binding
tests of both fronts:

* ``rms_like(x, w, b, out, rows: Int32, D: Int32, eps: Float32, stream,
  num_blocks: Constexpr)``: ``out = x * w + b + eps`` in ``num_blocks``
  blocks -- the constexpr after the stream, as
  ``cute.compile(kernel, x, w, b, out, Int32(rows), Int32(D), Float32(eps),
  stream, num_blocks)``;
* ``bmm(gemm_op: Constexpr, a, b, c, stream, epilogue: Constexpr)``: a
  configuration object first and an epilogue lambda last, as
  ``cute.compile(bmm, gemm_op, a, b, c, stream, epilogue)``; ``gemm_op`` is
  a :class:`ScaledMul`, whose ``__call__`` fills attributes while traced
  (CUTLASS's GEMM objects do: their layouts, tilers);
* ``mix(x, mode: Constexpr, y, out, stream)``: between tensors; ``out = x +
  y`` for ``"add"``, ``x * y`` for ``"mul"``.

1-D float32, 128 threads a block. The DSL re-parses kernel sources: they
live in a real file.
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

_THREADS = 128


def _index():
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    return bidx * _THREADS + tidx


@cute.kernel
def _rms_kernel(x: cute.Tensor, w: cute.Tensor, b: cute.Tensor, out: cute.Tensor,
                rows: cutlass.Int32, eps: cutlass.Float32, blocks: cutlass.Constexpr):
    i = _index()
    while i < rows:
        out[i] = x[i] * w[i] + b[i] + eps
        i += blocks * _THREADS


@cute.jit
def rms_like(x: cute.Tensor, w: cute.Tensor, b: cute.Tensor, out: cute.Tensor,
             rows: cutlass.Int32, D: cutlass.Int32, eps: cutlass.Float32,
             stream: cuda.CUstream, num_blocks: cutlass.Constexpr):
    """``out = x * w + b + eps`` (`D` unused: one column), in `num_blocks`
    blocks."""
    _rms_kernel(x, w, b, out, rows, eps, num_blocks).launch(
        grid=(num_blocks, 1, 1), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _mul_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, factor: cutlass.Constexpr,
                epilogue: cutlass.Constexpr):
    i = _index()
    if i < c.shape[0]:
        c[i] = epilogue(a[i] * b[i] * factor)


class ScaledMul:
    """``c = epilogue(a * b * factor)``: a configuration object its
    launcher takes as a constexpr; tracing it fills attributes."""

    def __init__(self, factor: float):
        self.factor = factor
        self.threads = _THREADS

    @cute.jit
    def __call__(self, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor,
                 stream: cuda.CUstream, epilogue: cutlass.Constexpr = lambda v: v):
        self.a_dtype = a.element_type
        self.grid = cute.ceil_div(c.shape[0], self.threads)
        _mul_kernel(a, b, c, self.factor, epilogue).launch(
            grid=(self.grid, 1, 1), block=(self.threads, 1, 1), stream=stream)


@cute.jit
def bmm(gemm_op: cutlass.Constexpr, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor,
        stream: cuda.CUstream, epilogue: cutlass.Constexpr = lambda v: v):
    """``gemm_op(a, b, c, stream, epilogue)``."""
    gemm_op(a, b, c, stream, epilogue)


@cute.kernel
def _mix_kernel(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor, mode: cutlass.Constexpr):
    i = _index()
    if i < out.shape[0]:
        if cutlass.const_expr(mode == "add"):
            out[i] = x[i] + y[i]
        else:
            out[i] = x[i] * y[i]


@cute.jit
def mix(x: cute.Tensor, mode: cutlass.Constexpr, y: cute.Tensor, out: cute.Tensor,
        stream: cuda.CUstream):
    """``out = x + y`` (``mode="add"``) or ``x * y``."""
    n = out.shape[0]
    _mix_kernel(x, y, out, mode).launch(grid=((n + _THREADS - 1) // _THREADS, 1, 1),
                                        block=(_THREADS, 1, 1), stream=stream)
