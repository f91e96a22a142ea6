"""Kernels that fail on purpose, for the tests of
``cutecall.set_launch_blocking`` (``CUTECALL_LAUNCH_BLOCKING=1``) and of
the launch route (``CUTECALL_LAUNCH_DRIVER``).

``oob_write(stream, out, distance)`` writes one float ``distance`` elements
past the start of ``out``: with a distance far beyond any allocation (e.g.
``1 << 40``), the write is an illegal address. ``bad_block(stream, out)``
asks for 2048 threads per block, a launch every GPU refuses. The DSL
re-parses kernel sources, so the kernels live in this file.
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

__all__ = ["oob_write", "bad_block"]


@cute.kernel
def _oob_kernel(out: cute.Tensor, distance: cutlass.Int64):
    far = cute.make_tensor(out.iterator + distance, cute.make_layout(1))
    far[0] = out.element_type(1.0)


@cute.jit
def oob_write(stream: cuda.CUstream, out: cute.Tensor, distance: cutlass.Int64):
    """Writes ``out[distance]``, unchecked (a fault for a large distance)."""
    _oob_kernel(out, distance).launch(grid=(1, 1, 1), block=(1, 1, 1), stream=stream)


@cute.kernel
def _fill_kernel(out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    if tidx < out.shape[0]:
        out[tidx] = out.element_type(1.0)


@cute.jit
def bad_block(stream: cuda.CUstream, out: cute.Tensor):
    """Fills ``out[:2048]`` with ones from one block of 2048 threads: a
    launch the GPU refuses (at most 1024 threads per block)."""
    _fill_kernel(out).launch(grid=(1, 1, 1), block=(2048, 1, 1), stream=stream)
