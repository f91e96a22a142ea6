"""Launchers written the ways users write them: stream last, no stream,
outputs first, runtime scalars, ``Optional`` tensors, constexprs.

Every kernel here is a simple 1-D elementwise map, one thread per element,
bounds-checked, so any length works. ``REFERENCES`` maps each launcher to a
numpy reference taking the call's arguments as numpy values.
"""

from typing import Optional

import cuda.bindings.driver as cuda
import numpy as np

import cutlass
import cutlass.cute as cute

__all__ = ["axpby_stream_last", "scale_no_stream", "scale_outputs_first",
           "add_optional_bias", "affine", "fill", "scale_default", "REFERENCES"]

_THREADS = 256


def _grid(n):
    return ((n + _THREADS - 1) // _THREADS, 1, 1)


@cute.kernel
def _axpby_kernel(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor,
                  alpha: cutlass.Float32, beta: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < out.shape[0]:
        out[i] = (alpha * x[i].to(cutlass.Float32)
                  + beta * y[i].to(cutlass.Float32)).to(out.element_type)


@cute.jit
def axpby_stream_last(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor,
                      alpha: cutlass.Float32, beta: cutlass.Float32,
                      stream: cuda.CUstream):
    """``out = alpha * x + beta * y``; the stream comes last, the runtime
    scalars after the output (pass them by keyword, or positionally after
    the arrays)."""
    n = out.shape[0]
    if n > 0:
        _axpby_kernel(x, y, out, alpha, beta).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _scale_kernel(x: cute.Tensor, out: cute.Tensor, alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < out.shape[0]:
        out[i] = (alpha * x[i].to(cutlass.Float32)).to(out.element_type)


@cute.jit
def scale_no_stream(x: cute.Tensor, alpha: cutlass.Float32, out: cute.Tensor):
    """``out = alpha * x``. No stream parameter and no ``stream=`` at the
    launch: cutecall puts the launch on the caller's stream."""
    n = out.shape[0]
    if n > 0:
        _scale_kernel(x, out, alpha).launch(grid=_grid(n), block=(_THREADS, 1, 1))


@cute.jit
def scale_outputs_first(stream: cuda.CUstream, out: cute.Tensor, x: cute.Tensor,
                        *, factor: cutlass.Constexpr = 2.0):
    """``out = factor * x``: the output before the input (``operand_order=
    "outputs_first"``) and a keyword-only constexpr with a default."""
    n = out.shape[0]
    if n > 0:
        _scale_kernel(x, out, cutlass.Float32(factor)).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.jit
def add_optional_bias(stream: cuda.CUstream, x: cute.Tensor,
                      bias: Optional[cute.Tensor], out: cute.Tensor):
    """``out = x + bias``, or ``out = x`` when ``bias`` is ``None`` (each
    case is its own compile: ``None`` is structure, not data)."""
    n = out.shape[0]
    if n > 0:
        if cutlass.const_expr(bias is None):
            _scale_kernel(x, out, cutlass.Float32(1.0)).launch(
                grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)
        else:
            _axpby_kernel(x, bias, out, cutlass.Float32(1.0),
                          cutlass.Float32(1.0)).launch(
                grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _affine_kernel(x: cute.Tensor, out: cute.Tensor, scale: cutlass.Float32,
                   shift: cutlass.Int32, offset: cutlass.Int64,
                   negate: cutlass.Boolean):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < out.shape[0]:
        v = scale * x[i] + shift.to(cutlass.Float32) + offset.to(cutlass.Float32)
        if negate:
            v = -v
        out[i] = v


@cute.jit
def affine(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor,
           scale: cutlass.Float32, shift: cutlass.Int32, offset: cutlass.Int64,
           negate: cutlass.Boolean):
    """``out = ±(scale * x + shift + offset)`` for f32 ``x``: one runtime
    scalar of each kind (Float32, Int32, Int64, Boolean)."""
    n = out.shape[0]
    if n > 0:
        _affine_kernel(x, out, scale, shift, offset, negate).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _fill_kernel(out: cute.Tensor, value: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < out.shape[0]:
        out[i] = value.to(out.element_type)


@cute.jit
def fill(stream, value, out: cute.Tensor):
    """``out[:] = value``: no inputs but a scalar; ``stream`` found by name
    and ``value`` unannotated (a Python float becomes a runtime Float32)."""
    n = out.shape[0]
    if n > 0:
        _fill_kernel(out, cutlass.Float32(value)).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


@cute.kernel
def _scale_any_float_kernel(x: cute.Tensor, out: cute.Tensor, alpha: cute.Float):
    # `cute.Float` is abstract: a Python float is refused ("can't cast"), a
    # DSL Float32 taken as is -- as CUTLASS's CtaNorm.kernel(eps: cute.Float).
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < out.shape[0]:
        out[i] = (alpha * x[i].to(cutlass.Float32)).to(out.element_type)


@cute.jit
def scale_default(x: cute.Tensor, out: cute.Tensor,
                  alpha: cutlass.Float32 = 0.5, stream: cuda.CUstream = None):
    """``out = alpha * x``, with ``alpha`` a runtime scalar whose Python
    default (as CUTLASS's ``CtaNorm.__call__(..., eps: cutlass.Float32 =
    1e-6)``) applies when the call leaves it out: the kernel sees
    ``cutlass.Float32(0.5)``."""
    n = out.shape[0]
    if n > 0:
        _scale_any_float_kernel(x, out, alpha).launch(
            grid=_grid(n), block=(_THREADS, 1, 1), stream=stream)


def _affine_ref(x, scale, shift, offset, negate):
    v = np.float32(scale) * x + np.float32(shift) + np.float32(offset)
    return -v if negate else v


REFERENCES = {
    "axpby_stream_last": lambda x, y, alpha, beta: alpha * x + beta * y,
    "scale_no_stream": lambda x, alpha: alpha * x,
    "scale_outputs_first": lambda x, factor=2.0: factor * x,
    "add_optional_bias": lambda x, bias: x if bias is None else x + bias,
    "affine": _affine_ref,
    "fill": lambda shape, value: np.full(shape, value, np.float32),
    "scale_default": lambda x, alpha=0.5: alpha * x,
}
