"""Small elementwise CuTe DSL kernels and their derivative kernels: the
examples of ``cutecall.differentiable`` and ``batch_modes`` (docs/transforms.md).

Launchers (1-D tensors of any length, float32 math; ``batch_modes=0``
holds for all of them: they are elementwise, so a batch folds into dim 0):

==========  ================================================
``mul``     ``out = x * y``
``fma``     ``out = a * b + c``
``scale``   ``out = alpha * x`` (``alpha``: a runtime scalar)
==========  ================================================

:func:`ops` builds the JAX-callable kernels and a differentiable model
function from them::

    from cutecall.examples import autodiff as ex
    k = ex.ops()
    loss = lambda x, w: (k.scaled_mul(x, w, 2.0) ** 2).sum()
    jax.grad(loss, argnums=(0, 1))(x, w)   # runs the backward kernels

The DSL re-parses kernel sources, so they live in this file.
"""

from __future__ import annotations

import types

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

__all__ = ["mul", "fma", "scale", "ops", "reference_model"]

_THREADS = 256


@cute.kernel
def _mul_kernel(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor,
                n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < n:
        v = x[i].to(cutlass.Float32) * y[i].to(cutlass.Float32)
        out[i] = v.to(out.element_type)


@cute.jit
def mul(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor,
        out: cute.Tensor):
    """``out = x * y`` elementwise (1-D, any length)."""
    n = out.shape[0]
    if n > 0:
        _mul_kernel(x, y, out, n).launch(
            grid=(cute.ceil_div(n, _THREADS), 1, 1), block=(_THREADS, 1, 1),
            stream=stream)


@cute.kernel
def _fma_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor,
                out: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < n:
        v = a[i].to(cutlass.Float32) * b[i].to(cutlass.Float32) + \
            c[i].to(cutlass.Float32)
        out[i] = v.to(out.element_type)


@cute.jit
def fma(stream: cuda.CUstream, a: cute.Tensor, b: cute.Tensor,
        c: cute.Tensor, out: cute.Tensor):
    """``out = a * b + c`` elementwise (1-D, any length)."""
    n = out.shape[0]
    if n > 0:
        _fma_kernel(a, b, c, out, n).launch(
            grid=(cute.ceil_div(n, _THREADS), 1, 1), block=(_THREADS, 1, 1),
            stream=stream)


@cute.kernel
def _scale_kernel(x: cute.Tensor, out: cute.Tensor, alpha: cutlass.Float32,
                  n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * _THREADS + tidx
    if i < n:
        out[i] = (alpha * x[i].to(cutlass.Float32)).to(out.element_type)


@cute.jit
def scale(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor,
          alpha: cutlass.Float32):
    """``out = alpha * x`` elementwise; ``alpha`` is a runtime scalar (one
    compile serves every value)."""
    n = out.shape[0]
    if n > 0:
        _scale_kernel(x, out, alpha, n).launch(
            grid=(cute.ceil_div(n, _THREADS), 1, 1), block=(_THREADS, 1, 1),
            stream=stream)


def ops(batch_modes=0):
    """The kernels as JAX callables, and differentiable functions of them.

    Returns a namespace with ``mul(x, y)``, ``fma(a, b, c)``,
    ``scale(x, alpha)`` (cutecall kernels), and

    * ``dmul``: ``mul`` with reverse-mode (``bwd``: two ``mul`` kernels,
      residuals ``(x, y)``) and forward-mode (``fma`` tangent kernel) rules;
    * ``dscale``: ``scale`` with both rules (``alpha`` non-differentiable,
      ``nondiff_argnums=(1,)``): the tangent and the cotangent of a linear
      kernel are the kernel itself;
    * ``scaled_mul(x, w, alpha) = alpha * x * w``: two kernels in a model.
    """
    import jax

    import cutecall

    like = lambda x, *_: jax.ShapeDtypeStruct(x.shape, x.dtype)  # noqa: E731
    k_mul = cutecall.cutlass_call(mul, output_shape_dtype=like,
                                  batch_modes=batch_modes)
    k_fma = cutecall.cutlass_call(fma, output_shape_dtype=like,
                                  batch_modes=batch_modes)
    k_scale = cutecall.cutlass_call(scale, output_shape_dtype=like,
                                    batch_modes=batch_modes)

    dmul = cutecall.differentiable(k_mul)
    dmul.defvjp(lambda x, y: (k_mul(x, y), (x, y)),               # fwd
                lambda res, g: (k_mul(g, res[1]), k_mul(g, res[0])))  # bwd
    dmul.defjvp(lambda p, t: (k_mul(*p),
                              k_fma(t[0], p[1], k_mul(p[0], t[1]))))

    dscale = cutecall.differentiable(k_scale, nondiff_argnums=(1,))
    dscale.defvjp(lambda x, alpha: (k_scale(x, alpha), None),
                  lambda alpha, res, g: (k_scale(g, alpha),))
    dscale.defjvp(lambda alpha, p, t: (k_scale(p[0], alpha),
                                       k_scale(t[0], alpha)))

    def scaled_mul(x, w, alpha):
        return dscale(dmul(x, w), alpha)

    return types.SimpleNamespace(mul=k_mul, fma=k_fma, scale=k_scale,
                                 dmul=dmul, dscale=dscale,
                                 scaled_mul=scaled_mul)


def reference_model(x, w, alpha):
    """Pure-JAX ``scaled_mul``."""
    return alpha * x * w
