"""Kernels of our own, written the way CuTe DSL authors write them, to
reproduce where cutecall lost to those authors' own paths.

Two kernel objects, each a ``@cute.jit __call__(tensors..., stream)`` over a
``@cute.kernel``, as QuACK's and the DSL examples' are:

* :class:`LayerNormSimt` -- a plain SIMT row kernel: one CTA per row, each
  thread strides over the row with scalar loads (no copy atoms, no tiled
  copies), a warp-shuffle and shared-memory reduction, then a second pass
  that normalizes. Its authors compile it per shape (``from_dlpack`` with no
  dynamic marks: every extent and stride static), so the row length is a
  compile-time loop bound.
* :class:`GateVec` -- a bandwidth-bound elementwise gate, ``out = x *
  sigmoid(g)``, over ``(n / k, k)`` views of half-precision tensors: one
  thread per row, each row ``.load()``-ed and ``.store()``-d whole (k = 8
  halves = one 16-byte vector), as the DSL's elementwise examples do.

QuACK's own small kernels (``TopK``, ``HadamardTransform`` at N = 640) are
used as they are (``repro_corpus``).

Imports the CuTe DSL at import: the corpus imports this module only when a
case is built.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32

WARP = 32


class LayerNormSimt:
    """``out = (x - mean) * rstd * w + b`` per row of ``x`` (M, N).

    ``threads`` threads per row (a multiple of 32). ``x``, ``out``: (M, N)
    bf16 or f16; ``w``, ``b``: (N,) of the same type; ``eps`` a runtime
    ``Float32``. Row statistics in float32.
    """

    def __init__(self, threads: int = 128):
        if threads % WARP:
            raise ValueError(f"threads must be a multiple of {WARP}, got {threads}")
        self.threads = threads

    @cute.jit
    def __call__(self, mX: cute.Tensor, mW: cute.Tensor, mB: cute.Tensor,
                 mO: cute.Tensor, eps: Float32, stream: cuda.CUstream):
        self.kernel(mX, mW, mB, mO, eps).launch(
            grid=[mX.shape[0], 1, 1], block=[self.threads, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mW: cute.Tensor, mB: cute.Tensor,
               mO: cute.Tensor, eps: Float32):
        tidx, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        n = mX.shape[1]
        total = Float32(0.0)
        total_sq = Float32(0.0)
        for j in cutlass.range(tidx, n, self.threads):
            v = mX[row, j].to(Float32)
            total += v
            total_sq += v * v
        total = cute.arch.warp_reduction_sum(total)
        total_sq = cute.arch.warp_reduction_sum(total_sq)

        warps = self.threads // WARP
        smem = cutlass.utils.SmemAllocator()
        partial = smem.allocate_tensor(Float32, cute.make_layout((2, warps)),
                                       byte_alignment=16)
        lane = tidx % WARP
        warp = tidx // WARP
        if lane == 0:
            partial[0, warp] = total
            partial[1, warp] = total_sq
        cute.arch.barrier()
        total = Float32(0.0)
        total_sq = Float32(0.0)
        for w in cutlass.range_constexpr(warps):
            total += partial[0, w]
            total_sq += partial[1, w]

        inv_n = Float32(1.0) / Float32(n)
        mean = total * inv_n
        var = total_sq * inv_n - mean * mean
        rstd = cute.math.rsqrt(var + eps)
        for j in cutlass.range(tidx, n, self.threads):
            v = (mX[row, j].to(Float32) - mean) * rstd
            y = v * mW[j].to(Float32) + mB[j].to(Float32)
            mO[row, j] = y.to(mO.element_type)


class GateVec:
    """``out = x * sigmoid(g)`` over (rows, k) views: one thread per row of
    k elements, loaded and stored whole (k = 8 halves: one 16-byte vector).

    ``x``, ``g``, ``out``: (rows, k) f16 or bf16, rows contiguous.
    """

    def __init__(self, threads: int = 256):
        self.threads = threads

    @cute.jit
    def __call__(self, mX: cute.Tensor, mG: cute.Tensor, mO: cute.Tensor,
                 stream: cuda.CUstream):
        rows = mX.shape[0]
        self.kernel(mX, mG, mO).launch(
            grid=[cute.ceil_div(rows, self.threads), 1, 1],
            block=[self.threads, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mG: cute.Tensor, mO: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * self.threads + tidx
        if i < mX.shape[0]:
            x = mX[i, None].load().to(Float32)
            g = mG[i, None].load().to(Float32)
            y = x / (Float32(1.0) + cute.math.exp(-g, fastmath=True))
            mO[i, None].store(y.to(mO.element_type))
