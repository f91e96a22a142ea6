"""cuDNN frontend's Hopper block-sparse attention in JAX, differentiable.

cuDNN frontend 1.32 ships sm90 CuTe DSL kernels for block-sparse attention
with 128-token blocks (``cudnn.block_sparse_attention``); its own JAX API
(``cudnn.block_sparse_attention.jax_api``) compiles the sm100 kernels for
``sm_100a`` only. Here cuDNN's sm90 kernel objects run through cutecall,
called as cuDNN's torch path calls them (``_bsa_attn_fwd_sm90_blk128``,
``_bsa_attn_bwd_sm90_blk128``), with no torch and no TVM-FFI::

    from cutecall.attention import block_sparse_attention
    o = block_sparse_attention(q, k, v, indices, 2)       # (B, H, S, 128)
    dq, dk, dv = jax.grad(lambda q, k, v: block_sparse_attention(
        q, k, v, indices, 2).astype(jnp.float32).sum(), argnums=(0, 1, 2))(q, k, v)

Forward: ``BlockSparseAttnForwardSm90Blk128`` (q, k, v BHSD seen through
``TensorSpec(mode=...)`` as cuDNN's permuted views; o and lse saved).
Backward: cuDNN's bucketed K-to-Q CSR builder (``BucketedK2QCsrUniversal``,
its edge counts zeroed), then ``BlockSparseAttnBackwardSm90Blk128`` with its
float32 workspace (dK/dV accumulators zeroed where cuDNN zeroes them: only
when more than one query bucket accumulates). Extents and the scale are
runtime values: one compile per kernel configuration serves every shape.
The kernels' calls are in :mod:`~cutecall.attention.block_sparse_kernels`;
this module checks the arguments and pairs forward and backward.
"""

from __future__ import annotations

import functools
import math

from . import block_sparse_kernels as bk
from .block_sparse_kernels import BLOCK, BUCKET, HEAD_DIM, Config, bhsd

__all__ = ["block_sparse_attention"]

NAME = "block_sparse_attention"
LAYOUTS = ("bhsd", "bshd")


def block_sparse_attention(q, k, v, indices, count=None, *, scale=None, layout="bhsd",
                           bucket_size_blocks=None, sparse_block_size=BLOCK):
    """Block-sparse softmax attention with cuDNN's sm90 kernels,
    differentiable in q, k and v (``jax.grad``, ``jax.vjp``; under ``jit``).

    Query block ``i`` (128 tokens) attends to the key blocks
    ``indices[b, h, i, :count]``; other keys are masked out.

    Example (a Hopper GPU; each of 4 query blocks sees itself and the next)::

        import jax, jax.numpy as jnp
        from cutecall.attention import block_sparse_attention
        q = k = v = jnp.ones((1, 2, 512, 128), jnp.bfloat16)      # (B, H, S, D)
        i = jnp.arange(4, dtype=jnp.int32)[:, None]
        idx = jnp.broadcast_to((i + jnp.arange(2)) % 4, (1, 2, 4, 2)).astype(jnp.int32)
        o = block_sparse_attention(q, k, v, idx, 2)
        dq = jax.grad(lambda q: block_sparse_attention(q, k, v, idx, 2)
                      .astype(jnp.float32).sum())(q)

    Args (as cuDNN's ``jax_api.block_sparse_attention`` takes them):
      q, k, v: (B, H, S, 128) (``layout="bhsd"``) or (B, S, H, 128)
        (``"bshd"``), bfloat16 or float16 alike; k and v share (B, H, Sk);
        Sq and Sk multiples of 128.
      indices: int32 (B, H, Sq / 128, C), C <= Sk / 128: the key blocks
        each query block attends to. The first `count` of each row must be
        distinct and in ``[0, Sk / 128)`` (cuDNN's contract; not checked:
        values are on the device).
      count: how many of each row's blocks are used, 1 <= count <= C (a
        Python int; default C). One compile of the backward's CSR builder
        per count.
      scale: the softmax scale, a finite positive float (runtime: no
        recompile per value); default ``D ** -0.5``.
      layout: ``"bhsd"`` (default) or ``"bshd"``.
      bucket_size_blocks: query blocks per CSR bucket in the backward
        (default 256, cuDNN's). When ``Sq / 128`` exceeds it, dK/dV
        accumulate in a zeroed float32 workspace.
      sparse_block_size: 128, the only block size of cuDNN's sm90 kernels
        here (accepted as cuDNN's JAX API takes it).

    Arrays placed on a GPU must be on an sm90 one (H100/H200).

    Returns:
      o, q's shape and dtype.
    """
    if sparse_block_size != BLOCK:
        raise ValueError(f"{NAME}: sparse_block_size must be {BLOCK} (cuDNN's sm90 blk128 "
                         f"kernels), got {sparse_block_size!r}")
    c, scale = _check(q, k, v, indices, count, scale, layout, bucket_size_blocks)
    _check_devices(q=q, k=k, v=v, indices=indices)
    return _attention(c, scale, q, k, v, indices)


def _check_devices(**arrays):
    """Placed arrays (not tracers) on a GPU must be on one of compute
    capability 9.x (cuDNN's sm90 kernels use Hopper's wgmma and TMA)."""
    import jax
    for name, x in arrays.items():
        if isinstance(x, jax.core.Tracer) or not isinstance(x, jax.Array):
            continue
        for dev in x.devices():
            cap = str(getattr(dev, "compute_capability", ""))
            if dev.platform == "gpu" and not cap.startswith("9."):
                raise ValueError(f"{NAME}: {name} must be on an sm90 GPU (H100/H200: "
                                 f"cuDNN's sm90 kernels), got {dev} of compute "
                                 f"capability {cap}")


def _check(q, k, v, indices, count, scale, layout, bucket):
    """The checked configuration and scale; errors name the argument and value."""
    import numpy as np
    if layout not in LAYOUTS:
        raise ValueError(f"{NAME}: layout must be one of {LAYOUTS}, got {layout!r}")
    for name, x in (("q", q), ("k", k), ("v", v), ("indices", indices)):
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"{NAME}: {name} must be a JAX array, got {type(x).__name__}")
        if len(x.shape) != 4:
            raise ValueError(f"{NAME}: {name} must be rank 4, got shape {tuple(x.shape)}")
    dtype = np.dtype(q.dtype).name
    if dtype not in ("bfloat16", "float16"):
        raise TypeError(f"{NAME}: q must be bfloat16 or float16, got {dtype}")
    for name, x in (("k", k), ("v", v)):
        if np.dtype(x.dtype).name != dtype:
            raise TypeError(f"{NAME}: {name} must have q's dtype {dtype}, got "
                            f"{np.dtype(x.dtype).name}")
    b, h, sq, d = bhsd(layout, q.shape)
    sk = bhsd(layout, k.shape)[2]
    if d != HEAD_DIM:
        raise ValueError(f"{NAME}: head dim must be {HEAD_DIM} (cuDNN's sm90 block-sparse "
                         f"backward is specialized for it), got q shape {tuple(q.shape)}")
    for name, x in (("k", k), ("v", v)):
        want = bhsd(layout, (b, h, sk, d))
        if tuple(x.shape) != want:
            raise ValueError(f"{NAME}: {name} must have shape {want} ({layout}, k's "
                             f"length {sk}), got {tuple(x.shape)}")
    for name, s in (("q", sq), ("k", sk)):
        if s % BLOCK or s == 0:
            raise ValueError(f"{NAME}: {name}'s sequence length must be a positive multiple "
                             f"of the {BLOCK}-token block, got {s}")
    nq, nk = sq // BLOCK, sk // BLOCK
    if np.dtype(indices.dtype).name != "int32":
        raise TypeError(f"{NAME}: indices must be int32, got {np.dtype(indices.dtype).name}")
    cap = indices.shape[-1]
    if tuple(indices.shape[:3]) != (b, h, nq) or not 0 < cap <= nk:
        raise ValueError(f"{NAME}: indices must have shape (B, H, Sq/{BLOCK}, C) = "
                         f"({b}, {h}, {nq}, C) with 0 < C <= {nk}, got {tuple(indices.shape)}")
    count = cap if count is None else count
    if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or \
            not 1 <= count <= cap:
        raise ValueError(f"{NAME}: count must be a Python int in [1, {cap}] (indices' last "
                         f"dim), got {count!r}")
    scale = d ** -0.5 if scale is None else scale
    if not isinstance(scale, (int, float, np.floating)) or isinstance(scale, bool) or \
            not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"{NAME}: scale must be a finite positive Python float, got {scale!r}")
    bucket = BUCKET if bucket is None else bucket
    if not isinstance(bucket, int) or isinstance(bucket, bool) or not 0 < bucket < 2 ** 31:
        raise ValueError(f"{NAME}: bucket_size_blocks must be a positive int, got {bucket!r}")
    return Config(dtype, int(count), int(cap), layout, bucket), float(scale)


def _attention(c, scale, q, k, v, indices):
    return _differentiable()(c, scale, q, k, v, indices)


@functools.cache
def _differentiable():
    """The ``jax.custom_vjp`` (made on first use: importing this module
    imports no JAX). Residuals: q, k, v, o, lse, indices."""
    import jax

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
    def attention(c, scale, q, k, v, indices):
        return bk.forward(c)(q, k, v, indices, scale)[0]

    def fwd(c, scale, q, k, v, indices):
        o, lse = bk.forward(c)(q, k, v, indices, scale)
        return o, (q, k, v, o, lse, indices)

    def bwd(c, scale, res, do):
        q, k, v, o, lse, indices = res
        return (*bk.backward(c, q, k, v, o, lse, indices, do, scale), None)

    attention.defvjp(fwd, bwd)
    return attention
