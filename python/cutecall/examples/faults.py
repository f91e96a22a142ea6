"""A kernel that faults on purpose, for the tests of
``cutecall.set_launch_blocking`` (``CUTECALL_LAUNCH_BLOCKING=1``).

``oob_write(stream, out, distance)`` writes one float ``distance`` elements
past the start of ``out``: with a distance far beyond any allocation (e.g.
``1 << 40``), the write is an illegal address. The DSL re-parses kernel
sources, so the kernel lives in this file.
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

__all__ = ["oob_write"]


@cute.kernel
def _oob_kernel(out: cute.Tensor, distance: cutlass.Int64):
    far = cute.make_tensor(out.iterator + distance, cute.make_layout(1))
    far[0] = out.element_type(1.0)


@cute.jit
def oob_write(stream: cuda.CUstream, out: cute.Tensor, distance: cutlass.Int64):
    """Writes ``out[distance]``, unchecked (a fault for a large distance)."""
    _oob_kernel(out, distance).launch(grid=(1, 1, 1), block=(1, 1, 1), stream=stream)
