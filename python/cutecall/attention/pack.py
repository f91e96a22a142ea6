"""The default kernel pack of :mod:`cutecall.attention`
(``cutecall pack build attention --arch sm_90a,sm_100a``): FA4's forward
and backward kernels for the configurations most training and serving
steps use, compiled ahead of time so that a process using the pack compiles
none of them (``docs/cache.md``, "Packs").

:func:`configs` yields, per configuration, a function that lowers
``jax.grad`` of ``attention`` for the target arch (``$CUTECALL_ARCH``, set
by ``cutecall pack build``): one lowering makes every kernel of the
configuration (forward, preprocess, backward, postprocesses). Extents do
not matter (one compile serves every shape of a configuration); the
shapes below only pick FA4's prefill buckets on sm100.
"""

from __future__ import annotations

import itertools

DEFAULT_HEAD_DIMS = (64, 128)
DEFAULT_DTYPES = ("bfloat16",)
GQA = (1, 4)  # query heads per KV head: MHA and a common GQA ratio


def configs(arch: str, head_dims=DEFAULT_HEAD_DIMS, dtypes=DEFAULT_DTYPES,
            causal=(False, True), gqa=GQA):
    """Zero-argument functions, one per (dtype, head dim, causal, GQA
    ratio), each lowering attention's forward and backward for `arch`."""
    for dtype, d, is_causal, g in itertools.product(dtypes, head_dims, causal, gqa):
        yield lambda dtype=dtype, d=d, is_causal=is_causal, g=g: _lower(
            dtype, d, is_causal, g)


def _lower(dtype: str, d: int, causal: bool, g: int):
    import jax
    import jax.numpy as jnp

    from cutecall.attention import attention
    heads = 8
    q = jax.ShapeDtypeStruct((2, 1024, heads, d), jnp.dtype(dtype))
    kv = jax.ShapeDtypeStruct((2, 1024, heads // g, d), jnp.dtype(dtype))

    def loss(q, k, v):
        return attention(q, k, v, causal=causal).astype(jnp.float32).sum()
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    return grads.trace(q, kv, kv).lower(lowering_platforms=("cuda",))
