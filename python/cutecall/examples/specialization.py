"""Kernels that show what layout specialization and the static fallback are
for: each compiles only when cutecall tells the DSL enough about a layout,
as third-party kernels (QuACK, FlashAttention-4) need.

=====================  =====================================================
``row_copy_vec``       ``out = x`` for 2-D ``(M, N)`` tensors, 16 bytes per
                       access: row starts must be 16-byte aligned, which the
                       DSL proves from the row stride's divisibility class
``row_sum_unrolled``   ``out[m] = sum_n x[m, n]`` with the row loop unrolled
                       at trace time: needs ``N`` static (rung 1 of the
                       static fallback: ``M`` stays dynamic)
``tile_scale_load``    ``out = 2 * x`` for a small ``(M, N)`` tensor loaded
                       whole into registers (``Tensor.load``): needs the
                       whole layout static (the last rung)
=====================  =====================================================

Each requirement is documented on the launcher. The DSL needs the kernels in
a real source file, which is why they live in this module.
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

__all__ = ["row_copy_vec", "row_sum_unrolled", "tile_scale_load"]

_THREADS = 128


@cute.kernel
def _row_copy_kernel(x: cute.Tensor, out: cute.Tensor, atom: cute.CopyAtom,
                     vec: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    m, _, _ = cute.arch.block_idx()
    src = cute.zipped_divide(x[m, None], (vec,))    # ((vec,), (N / vec,))
    dst = cute.zipped_divide(out[m, None], (vec,))
    for j in cutlass.range(tidx, cute.size(src, mode=[1]), _THREADS):
        r = cute.make_fragment_like(src[None, j])
        cute.copy(atom, src[None, j], r)
        cute.copy(atom, r, dst[None, j])


@cute.jit
def row_copy_vec(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out = x`` for 2-D row-major ``(M, N)`` tensors, 128-bit accesses.

    Requires ``N`` to be a multiple of 16 bytes' worth of elements (8 for
    bf16/f16, 4 for f32). With cutecall's default (layout specialization)
    this compiles whenever the arrays' ``N`` is in that divisibility class;
    with ``TensorSpec(divisibility=1)`` the DSL cannot prove a row start
    16-byte aligned and rejects the 128-bit copy.
    """
    vec = 128 // x.element_type.width
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), x.element_type,
                               num_bits_per_copy=128)
    if x.shape[0] > 0:
        _row_copy_kernel(x, out, atom, vec).launch(
            grid=(x.shape[0], 1, 1), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _row_sum_kernel(x: cute.Tensor, out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    m, _, _ = cute.arch.block_idx()
    row = m * _THREADS + tidx
    if row < x.shape[0]:
        acc = cutlass.Float32(0.0)
        for j in cutlass.range_constexpr(x.shape[1]):  # unrolled: N static
            acc = acc + x[row, j].to(cutlass.Float32)
        out[row] = acc.to(out.element_type)


@cute.jit
def row_sum_unrolled(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out[m] = sum_n x[m, n]`` for small ``N``, one thread per row with
    the row loop unrolled at trace time: ``N`` must be static. cutecall's
    static fallback compiles ``N`` in and keeps ``M`` dynamic."""
    if x.shape[0] > 0:
        _row_sum_kernel(x, out).launch(
            grid=(cute.ceil_div(x.shape[0], _THREADS), 1, 1),
            block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _tile_scale_kernel(x: cute.Tensor, out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        v = x.load()                  # the whole tensor, into registers
        out.store(v * cutlass.Float32(2.0).to(x.element_type))


@cute.jit
def tile_scale_load(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out = 2 * x`` for a small tensor, loaded whole with
    ``Tensor.load()``: the layout must be static (shape and strides). The
    static fallback's last rung, or ``use_static_tensors=True``."""
    _tile_scale_kernel(x, out).launch(grid=(1, 1, 1), block=(32, 1, 1),
                                      stream=stream)
