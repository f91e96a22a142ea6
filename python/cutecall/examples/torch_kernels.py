"""Example kernels for the PyTorch front (``cutecall.torch``).

* ``axpby_2d``: a ``@cute.jit`` launcher for launch objects —
  ``out = alpha * x + y`` on rank-2 tensors of any strides (views included),
  ``alpha`` a runtime ``Float32``.
* ``add3``: a 3-tensor elementwise launcher (``c = a + b``, rank 1) with one
  thread per element: the benchmark's kernel.
* ``helion_add_kernel``, ``helion_scale_rows_kernel``: ``@cute.kernel``
  functions in Helion's style, for ``default_cute_launcher`` (tensor
  arguments, a runtime scalar, a ``Constexpr``); ``helion_cluster_kernel``
  asks for a cluster launch through ``_helion_cute_cluster_shape``.

Float32 tensors throughout. References in ``REFERENCES``.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute

_THREADS = 128


@cute.kernel
def _axpby_2d_kernel(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor,
                     alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, row, _ = cute.arch.block_idx()
    col = bidx * _THREADS + tidx
    if col < out.shape[1]:
        out[row, col] = alpha * x[row, col] + y[row, col]


@cute.jit
def axpby_2d(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor,
             out: cute.Tensor, alpha: cutlass.Float32):
    """``out = alpha * x + y``; x, y, out: (m, n) float32, any strides."""
    m, n = out.shape
    if m > 0 and n > 0:
        _axpby_2d_kernel(x, y, out, alpha).launch(
            grid=((n + _THREADS - 1) // _THREADS, m, 1),
            block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _add3_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < c.shape[0]:
        c[i] = a[i] + b[i]


@cute.jit
def add3(stream: cuda.CUstream, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    """``c = a + b``; rank-1 float32, any stride."""
    n = c.shape[0]
    if n > 0:
        _add3_kernel(a, b, c).launch(grid=((n + _THREADS - 1) // _THREADS, 1, 1),
                                     block=(_THREADS, 1, 1), stream=stream)


# -- Helion style: @cute.kernel functions launched by default_cute_launcher --

@cute.kernel
def helion_add_kernel(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor,
                      n: cutlass.Int64, scale: cutlass.Constexpr):
    """``out[i] = x[i] + scale * y[i]`` for i < n; one thread per element."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    if i < n:
        out[i] = x[i] + y[i] * scale


@cute.kernel
def helion_scale_rows_kernel(x: cute.Tensor, out: cute.Tensor, alpha: cutlass.Float32):
    """``out[r, c] = alpha * x[r, c]``; grid (ceil(cols / block), rows)."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, row, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    col = bidx * bdim + tidx
    if col < out.shape[1]:
        out[row, col] = alpha * x[row, col]


@cute.kernel
def helion_cluster_kernel(x: cute.Tensor, out: cute.Tensor):
    """``out[i] = x[i] + cluster size`` (a cluster launch of 2 CTAs)."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    if i < out.shape[0]:
        out[i] = x[i] + cutlass.Float32(cute.arch.block_in_cluster_dim()[0])


helion_cluster_kernel._helion_cute_cluster_shape = (2, 1, 1)


def _ref_axpby(x, y, alpha):
    return alpha * x + y


REFERENCES = {
    "axpby_2d": _ref_axpby,
    "add3": lambda a, b: a + b,
    "helion_add_kernel": lambda x, y, scale: x + scale * y,
    "helion_scale_rows_kernel": lambda x, alpha: alpha * x,
    "helion_cluster_kernel": lambda x: x + 2.0,
}
