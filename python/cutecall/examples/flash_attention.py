"""FlashAttention-4 in JAX: FA4's Hopper kernels as one differentiable
function, run by cutecall (no torch, no TVM-FFI).

    from cutecall.examples.flash_attention import attention
    o = attention(q, k, v, causal=True)          # (B, S, H, D) bf16/fp16
    dq, dk, dv = jax.grad(lambda q, k, v: attention(q, k, v).sum(),
                          argnums=(0, 1, 2))(q, k, v)

How it is built (the template for wrapping any CuTe DSL library; see
``docs/examples/flash_attention.md``):

1. :mod:`~cutecall.examples.flash_attention_kernels` builds FA4's kernel
   objects exactly as ``flash_attn.cute.interface`` does for sm90 and wraps
   each in ``cutecall.cutlass_call`` with output shapes that follow the
   arguments, so one compile per :class:`Config` serves every shape;
2. :func:`attention` pairs the forward with FA4's backward pipeline through
   ``cutecall.differentiable``: the forward keeps (q, k, v, o, lse) as
   residuals; the backward runs the preprocess (dPsum, LSE in log2, a
   zeroed dQ accumulator), the main backward kernel, and the postprocess
   that converts the float32 dQ (and, for GQA, dK and dV) accumulators;
3. every kernel declares ``batch_modes=0``, so ``jax.vmap`` folds an extra
   batch into B and launches once; under ``shard_map`` each device runs the
   kernels on its shard (batch or heads).

Requires ``flash-attn-4`` (the ``external`` extra) and the CuTe DSL; runs on
Hopper (sm90). Shapes: q (..., Sq, H, D), k and v (..., Sk, Hkv, D) with H a
multiple of Hkv, D 64 or 128, one dtype (bfloat16 or float16).
"""

from __future__ import annotations

import functools
import math

from . import flash_attention_kernels as fk

__all__ = ["attention", "Config"]

Config = fk.Config


def attention(q, k, v, *, causal: bool = False, scale: float | None = None):
    """Softmax attention ``softmax(scale * q k^T [+ causal mask]) v``.

    Args:
      q: (..., Sq, H, D) queries; leading dims are batch dims.
      k, v: (..., Sk, Hkv, D) keys and values; H must be a multiple of Hkv
        (grouped-query attention).
      causal: mask keys after each query (aligned at the bottom right, as
        FA4 and ``jax.nn.dot_product_attention`` do when Sq != Sk).
      scale: the softmax scale; default ``D ** -0.5``.

    Returns:
      (..., Sq, H, D), q's dtype. Differentiable in q, k and v.
    """
    c = _check(q, k, v, causal)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    lead = q.shape[:-3]
    if len(lead) != 1:  # fold (or add) the batch dims into one
        q, k, v = (x.reshape((-1,) + x.shape[-3:]) for x in (q, k, v))
    o = _differentiable(c, scale)(q, k, v)
    return o.reshape(lead + o.shape[1:])


def _check(q, k, v, causal: bool) -> Config:
    name = "cutecall.examples.flash_attention.attention"
    for arg, x in (("q", q), ("k", k), ("v", v)):
        if getattr(x, "ndim", 0) < 3:
            raise ValueError(f"{name}: {arg} must be (..., S, H, D), got shape "
                             f"{getattr(x, 'shape', None)}")
    if k.shape != v.shape:
        raise ValueError(f"{name}: k and v must have one shape, got {k.shape} and {v.shape}")
    if q.shape[:-3] != k.shape[:-3]:
        raise ValueError(f"{name}: q and k must have the same batch dims, got "
                         f"{q.shape[:-3]} and {k.shape[:-3]}")
    dtype = str(q.dtype)
    if dtype not in fk.DTYPES or str(k.dtype) != dtype or str(v.dtype) != dtype:
        raise ValueError(f"{name}: q, k and v must all be bfloat16 or float16, "
                         f"got {q.dtype}, {k.dtype}, {v.dtype}")
    d = q.shape[-1]
    if d not in fk.HEAD_DIMS or k.shape[-1] != d:
        raise ValueError(f"{name}: the head dim must be one of {fk.HEAD_DIMS} "
                         f"for q, k and v, got q {q.shape[-1]}, k {k.shape[-1]}")
    h, hkv = q.shape[-2], k.shape[-2]
    if hkv < 1 or h % hkv:
        raise ValueError(f"{name}: q's heads ({h}) must be a multiple of k's ({hkv})")
    return Config(dtype, d, h // hkv, bool(causal))


@functools.lru_cache(maxsize=None)
def _differentiable(c: Config, scale: float):
    import jax.numpy as jnp
    import cutecall

    def primal(q, k, v):
        return fk.forward(c)(q, k, v, scale)[0]

    def fwd(q, k, v):
        o, lse = fk.forward(c)(q, k, v, scale)
        return o, (q, k, v, o, lse)

    def bwd(res, do):
        q, k, v, o, lse = res
        dpsum, lse_log2, dq_accum = fk.preprocess(c)(o, do, lse)
        if c.qhead_per_kvhead > 1:
            b, sk, hkv, _ = k.shape
            shape = fk.dkv_accum_shape(c, b, sk, hkv)
            dk_acc, dv_acc = jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)
        else:
            dk_acc = dv_acc = None
        dq_accum, dk, dv = fk.backward(c)(q, k, v, do, lse_log2, dpsum,
                                          dq_accum, dk_acc, dv_acc, scale)
        dq = fk.postprocess(c, "dq")(dq_accum, q, scale)
        if c.qhead_per_kvhead > 1:
            dk = fk.postprocess(c, "dkv")(dk, k, scale)
            dv = fk.postprocess(c, "dkv")(dv, v, 1.0)
        return dq, dk, dv

    return cutecall.differentiable(primal).defvjp(fwd, bwd)
