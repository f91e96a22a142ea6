"""Launchers that take pytree arguments, the way QuACK's GEMMs take their
``EpilogueArguments``: a NamedTuple (or dataclass, dict) holding tensors,
``Optional`` tensors, runtime scalars annotated with a DSL type, and
``Constexpr`` fields. cutecall rebuilds the authors' own container inside
its generated wrapper, so the launcher receives exactly what its authors
pass::

    import cutecall, jax
    from cutecall.examples.pytrees import Epilogue, scaled_add

    call = cutecall.cutlass_call(scaled_add, output_shape_dtype=lambda x, e: x)
    out = call(x, Epilogue(bias=b, alpha=2.0))       # alpha: a runtime Float32
    out = call(x, Epilogue(bias=None, alpha=0.5, relu=True))  # relu: compiled in

Every kernel is a 1-D elementwise map, one thread per element, so any
length works. ``reference`` computes what ``scaled_add`` writes.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import cuda.bindings.driver as cuda
import numpy as np

import cutlass
import cutlass.cute as cute
from cutlass import Float32

__all__ = ["Epilogue", "Scales", "scaled_add", "scaled_add_into", "scaled_add_dc",
           "reference"]

_THREADS = 256


class Epilogue(NamedTuple):
    """What ``scaled_add`` does after ``x``: ``alpha * x (+ bias)``, then an
    optional ReLU (compiled in)."""

    bias: Optional[cute.Tensor] = None
    alpha: Float32 = 1.0
    relu: cutlass.Constexpr[bool] = False


@dataclasses.dataclass
class Scales:
    """The same epilogue as a dataclass (``scaled_add_dc``)."""

    alpha: Float32
    bias: Optional[cute.Tensor] = None


@cute.kernel
def _kernel(x: cute.Tensor, bias: Optional[cute.Tensor], out: cute.Tensor,
            alpha: Float32, relu: cutlass.Constexpr[bool]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < out.shape[0]:
        v = alpha * x[i].to(Float32)
        if cutlass.const_expr(bias is not None):
            v = v + bias[i].to(Float32)
        if cutlass.const_expr(relu):
            v = cute.arch.fmax(v, Float32(0.0))
        out[i] = v.to(out.element_type)


@cute.jit
def _launch(x: cute.Tensor, bias: Optional[cute.Tensor], out: cute.Tensor,
            alpha: Float32, relu: cutlass.Constexpr[bool], stream: cuda.CUstream):
    n = out.shape[0]
    if n > 0:
        _kernel(x, bias, out, alpha, relu).launch(
            grid=((n + _THREADS - 1) // _THREADS, 1, 1), block=(_THREADS, 1, 1),
            stream=stream)


@cute.jit
def scaled_add(x: cute.Tensor, epilogue: Epilogue, out: cute.Tensor,
               stream: cuda.CUstream):
    """``out = epilogue(x)``: the epilogue is a NamedTuple pytree."""
    _launch(x, epilogue.bias, out, epilogue.alpha, epilogue.relu, stream)


@cute.jit
def scaled_add_into(x: cute.Tensor, epilogue: Epilogue, sink: dict,
                    stream: cuda.CUstream):
    """``sink["out"] = epilogue(x)``: the output sits inside a pytree (a
    dict), as QuACK's post-activation sits in its ``EpilogueArguments``."""
    _launch(x, epilogue.bias, sink["out"], epilogue.alpha, epilogue.relu, stream)


@cute.jit
def scaled_add_dc(x: cute.Tensor, scales: Scales, out: cute.Tensor,
                  stream: cuda.CUstream):
    """``out = scales.alpha * x (+ scales.bias)``: a dataclass pytree."""
    _launch(x, scales.bias, out, scales.alpha, False, stream)


def reference(x, bias=None, alpha=1.0, relu=False):
    v = alpha * np.asarray(x, np.float32)
    if bias is not None:
        v = v + np.asarray(bias, np.float32)
    return np.maximum(v, 0.0) if relu else v
