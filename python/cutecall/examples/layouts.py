"""Kernels that read tensors by logical coordinate, for layout/mode tests:
whatever strides ``TensorSpec(layout=..., mode=...)`` gives a tensor, these
kernels compute on its logical view.

==================  =========================================================
``copy3d``          ``out[i, j, k] = x[i, j, k]`` on 3-D tensors, any strides
``copy2d``          ``out[i, j] = x[i, j]`` on 2-D tensors, any strides
``copy1d``          ``out[i] = x[i]``, any dtype of 8 bits or more
``copy_bits``       ``out = x`` bit for bit, any dtype (4-bit included); checks
                    the element type the kernel received
``gemm_mnkl``       ``C[m, n, l] = sum_k A[m, k, l] * B[n, k, l]`` in the
                    seed's MKL / NKL / MNL modes (naive, fp32 accumulate)
==================  =========================================================
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

__all__ = ["copy1d", "copy2d", "copy3d", "copy_bits", "gemm_mnkl"]

_THREADS = 128


@cute.kernel
def _copy3d_kernel(x: cute.Tensor, out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    i, j, _ = cute.arch.block_idx()
    for k in cutlass.range(tidx, out.shape[2], _THREADS):
        out[i, j, k] = x[i, j, k]


@cute.jit
def copy3d(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out = x`` by logical coordinate; one block per ``(i, j)``."""
    if cute.size(out) > 0:
        _copy3d_kernel(x, out).launch(grid=(out.shape[0], out.shape[1], 1),
                                      block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _copy2d_kernel(x: cute.Tensor, out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    i, _, _ = cute.arch.block_idx()
    for j in cutlass.range(tidx, out.shape[1], _THREADS):
        out[i, j] = x[i, j]


@cute.jit
def copy2d(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out = x`` by logical coordinate; one block per row."""
    if cute.size(out) > 0:
        _copy2d_kernel(x, out).launch(grid=(out.shape[0], 1, 1),
                                      block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _copy1d_kernel(x: cute.Tensor, out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < out.shape[0]:
        out[i] = x[i]


@cute.jit
def copy1d(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out = x`` element by element (dtype coverage)."""
    n = out.shape[0]
    if n > 0:
        _copy1d_kernel(x, out).launch(grid=((n + _THREADS - 1) // _THREADS, 1, 1),
                                      block=(_THREADS, 1, 1), stream=stream)


_UINT = {8: cutlass.Uint8, 16: cutlass.Uint16, 32: cutlass.Uint32,
         64: cutlass.Uint64}


@cute.jit
def copy_bits(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor, *,
              expect: cutlass.Constexpr = None):
    """``out = x`` as raw bits: the tensors are recast to the unsigned type of
    their width (4-bit types to ``Uint8``, two per byte: the length must be
    even), so every dtype copies exactly. ``expect``: the CuTe type name the
    kernel must have received (checked at compile time)."""
    if cutlass.const_expr(expect is not None):
        got = x.element_type.__name__
        assert got == expect, f"copy_bits received {got}, expected {expect}"
    width = x.element_type.width
    bits = _UINT[max(width, 8)]
    copy1d(stream, cute.recast_tensor(x, bits), cute.recast_tensor(out, bits))


@cute.kernel
def _gemm_mnkl_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    m, l, _ = cute.arch.block_idx()
    for n in cutlass.range(tidx, c.shape[1], _THREADS):
        acc = cutlass.Float32(0.0)
        for k in cutlass.range(a.shape[1]):
            acc = acc + a[m, k, l].to(cutlass.Float32) * b[n, k, l].to(cutlass.Float32)
        c[m, n, l] = acc.to(c.element_type)


@cute.jit
def gemm_mnkl(stream: cuda.CUstream, a: cute.Tensor, b: cute.Tensor,
              c: cute.Tensor):
    """``C = A @ B^T`` per batch, tensors in the seed's logical modes:
    ``a`` (M, K, L), ``b`` (N, K, L), ``c`` (M, N, L)."""
    if cute.size(c) > 0:
        _gemm_mnkl_kernel(a, b, c).launch(grid=(c.shape[0], c.shape[2], 1),
                                          block=(_THREADS, 1, 1), stream=stream)
