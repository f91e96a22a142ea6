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
"""

from __future__ import annotations

import dataclasses
import functools
import math

__all__ = ["block_sparse_attention", "forward_kernel", "backward_kernel", "csr_kernel",
           "workspace_size"]

NAME = "block_sparse_attention"
BLOCK = 128          # cuDNN's sm90 blk128 sparse block (tokens)
HEAD_DIM = 128       # its sm90 backward is specialized for D = Dv = 128
BUCKET = 256         # _bsa_attn_bwd_sm90_blk128's default bucket (query blocks)
LAYOUTS = ("bhsd", "bshd")
# The kernels' views of a BHSD array (cuDNN's permutes), and of a BSHD one.
_FWD_MODES = {"bhsd": ((2, 3, 1, 0), (3, 2, 1, 0)), "bshd": ((1, 3, 2, 0), (3, 1, 2, 0))}
_BWD_MODE = {"bhsd": None, "bshd": (0, 2, 1, 3)}
VI, LSE = (3, 2, 1, 0), (2, 1, 0)


def forward_kernel(d: int, count: int):
    """cuDNN's sm90 block-sparse forward object for head dim `d` and a fixed
    `count`, as ``_bsa_attn_fwd_sm90_blk128`` builds it: no GQA, one split,
    no kv tail, its stages rule (1 when count <= 1)."""
    from cudnn.block_sparse_attention.csrc.fwd.sm90_blk128.bsa_fwd_sm90 import (
        BlockSparseAttnForwardSm90Blk128)
    return BlockSparseAttnForwardSm90Blk128(d, d, 1, False, 0, 1, 1 if count <= 1 else 2,
                                            False, False)


def backward_kernel(d: int, groups: int, dtype: str = "bfloat16"):
    """cuDNN's sm90 block-sparse backward object, as
    ``_bsa_attn_bwd_sm90_blk128`` builds it: positive scale, K/V written
    directly when one bucket holds every query block (``groups == 1``), no
    kv tail."""
    import cutlass
    from cudnn.block_sparse_attention.csrc.bwd.sm90_blk128.bsa_bwd_sm90 import (
        BlockSparseAttnBackwardSm90Blk128)
    element = cutlass.BFloat16 if dtype == "bfloat16" else cutlass.Float16
    return BlockSparseAttnBackwardSm90Blk128(element, d, d, False, groups == 1, False)


def csr_kernel(count: int, bucket: int, capacity: int):
    """cuDNN's bucketed K-to-Q CSR builder, as ``build_bucketed_k2q_csr_cutedsl``
    builds it for a fixed `count` (no per-block counts)."""
    from cudnn.block_sparse_attention.csrc.bwd.bucketed_k2q_csr import BucketedK2QCsrUniversal
    return BucketedK2QCsrUniversal(count, bucket, False, capacity, False)


@dataclasses.dataclass(frozen=True)
class _Config:
    """What the kernels compile for (shapes are runtime)."""
    dtype: str
    count: int
    capacity: int
    layout: str
    bucket: int


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
    b, h, sq, d = _bhsd(layout, q.shape)
    sk = _bhsd(layout, k.shape)[2]
    if d != HEAD_DIM:
        raise ValueError(f"{NAME}: head dim must be {HEAD_DIM} (cuDNN's sm90 block-sparse "
                         f"backward is specialized for it), got q shape {tuple(q.shape)}")
    for name, x in (("k", k), ("v", v)):
        want = _bhsd(layout, (b, h, sk, d))
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
    return _Config(dtype, int(count), int(cap), layout, bucket), float(scale)


def _attention(c, scale, q, k, v, indices):
    return _differentiable()(c, scale, q, k, v, indices)


@functools.cache
def _differentiable():
    """The ``jax.custom_vjp`` (made on first use: importing this module
    imports no JAX). Residuals: q, k, v, o, lse, indices."""
    import jax

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
    def attention(c, scale, q, k, v, indices):
        return _forward(c)(q, k, v, indices, scale)[0]

    def fwd(c, scale, q, k, v, indices):
        o, lse = _forward(c)(q, k, v, indices, scale)
        return o, (q, k, v, o, lse, indices)

    def bwd(c, scale, res, do):
        q, k, v, o, lse, indices = res
        return (*_backward(c, q, k, v, o, lse, indices, do, scale), None)

    attention.defvjp(fwd, bwd)
    return attention


def _spec(mode=None, divisibility=1):
    """A TensorSpec whose divisibility holds for every shape _check accepts,
    so that one compile serves them all (the default derives a class from
    each extent: batch 1 and 2 would compile twice)."""
    from cutecall import TensorSpec
    return TensorSpec(mode=mode, divisibility=divisibility)


def _token_div(layout):
    """(B, H, S, D) / (B, S, H, D): S a multiple of 128, D = 128."""
    return (1, 1, 8, 8) if layout == "bhsd" else (1, 8, 1, 8)


@functools.lru_cache(maxsize=64)
def _forward(c: _Config):
    """``(q, k, v, indices, scale) -> (o, lse)``: one ``cutlass_call``, shapes
    from the arguments (one compile serves every shape)."""
    import jax
    import jax.numpy as jnp

    import cutecall
    qko_mode, vi_mode = _FWD_MODES[c.layout]
    qko, vi = _spec(qko_mode, _token_div(c.layout)), _spec(vi_mode, _token_div(c.layout))

    def outputs(q, *_):
        b, h, s, _d = _bhsd(c.layout, q.shape)
        return jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((b, h, s), jnp.float32)
    call = cutecall.cutlass_call(
        forward_kernel(HEAD_DIM, c.count), output_shape_dtype=outputs,
        input_spec=(qko, qko, vi, _spec(VI), _spec(), _spec()),
        output_spec=(qko, _spec(LSE, (1, 1, 4))), output_params=("o", "lse"),
        name=f"cudnn_bsa_fwd_sm90_{c.dtype}_{c.layout}")
    # counts and sizes are unused with a fixed count (cuDNN passes indices).
    return lambda q, k, v, idx, scale: call(q, k, v, idx, idx, idx, scale, c.count)


def _bhsd(layout, shape):
    shape = tuple(shape)
    return shape if layout == "bhsd" else (shape[0], shape[2], shape[1], shape[3])


@functools.lru_cache(maxsize=64)
def _csr(c: _Config):
    """``(indices, nk) -> (offsets, edges)``: cuDNN's bucketed K-to-Q CSR,
    its per-(bucket, key block) edge counts zeroed as cuDNN zeroes them."""
    import jax
    import jax.numpy as jnp

    import cutecall
    i32 = jnp.int32

    def outputs(counts, indices, _nums):
        b, h, g, nk = counts.shape
        edges = max(1, indices.shape[2] * c.count)
        return tuple(jax.ShapeDtypeStruct(s, i32) for s in (
            counts.shape, (b, h, g, nk + 1), (b, h, g), (b, h, g, nk + 1), counts.shape,
            (b, h, edges)))
    call = cutecall.cutlass_call(
        csr_kernel(c.count, c.bucket, c.capacity), output_shape_dtype=outputs,
        input_spec=_spec(), output_spec=_spec(), input_output_aliases={0: 0},
        output_params=("mLocalOffsets", "mGroupTotals", "mBucketedK2qOffsets", "mCursors",
                       "mBucketedK2qIndices"),
        name=f"cudnn_bsa_k2q_csr_{c.count}_{c.bucket}_{c.capacity}")

    def run(indices, nk: int):
        b, h, nq, _ = indices.shape
        counts = jnp.zeros((b, h, -(-nq // c.bucket), nk), i32)
        _, _, _, offsets, _, edges = call(counts, indices, indices)
        return offsets, edges
    return run


def workspace_size(sq: int, sk: int, d: int) -> int:
    """Per (batch, head) float32 elements of the backward's workspace
    (``_empty_bwd_workspace_with_zeroed_accum``: dPsum, LSE, dQ accumulator,
    dK and dV accumulators; lengths rounded to 128, D to 32)."""
    dr = -(-d // 32) * 32
    return 2 * sq + sq * dr + 2 * sk * dr


@functools.lru_cache(maxsize=64)
def _backward_call(c: _Config, direct: bool):
    """cuDNN's backward kernel as a ``cutlass_call``. `direct` (one query
    bucket): dK and dV written directly, the workspace a plain output
    (cuDNN zeroes none of it). Otherwise dK/dV accumulate in the
    workspace, which arrives zeroed and aliased."""
    import jax
    import jax.numpy as jnp

    import cutecall
    tok = _spec(_BWD_MODE[c.layout], _token_div(c.layout))
    ws = _spec(None, (1, 1, 4))

    def outputs(shape, do, o, q, k, v, *_):
        sq, sk, d, (h, b) = shape
        grads = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v))
        return grads + (jax.ShapeDtypeStruct((b, h, workspace_size(sq, sk, d)), jnp.float32),)
    names = ("mdQ", "mdK", "mdV") + (("workspace",) if direct else ())
    return cutecall.cutlass_call(
        backward_kernel(HEAD_DIM, 1 if direct else 2, c.dtype), output_shape_dtype=outputs,
        input_spec=(tok,) * 5 + (_spec(None, (1, 1, 4)), _spec(), _spec()) +
        (() if direct else (ws,)),
        output_spec=(tok,) * 3 + (ws,), output_params=names,
        input_output_aliases=None if direct else {10: 3},
        name=f"cudnn_bsa_bwd_sm90_{c.dtype}_{c.layout}_{'direct' if direct else 'accum'}")


def _backward(c: _Config, q, k, v, o, lse, indices, do, scale):
    """dq, dk, dv as ``_bsa_attn_bwd_sm90_blk128`` computes them."""
    import jax.numpy as jnp
    b, h, sq, d = _bhsd(c.layout, q.shape)
    sk = _bhsd(c.layout, k.shape)[2]
    offsets, edges = _csr(c)(indices, sk // BLOCK)
    direct = offsets.shape[2] == 1
    shape = (sq, sk, d, (h, b))
    args = (shape, do, o, q, k, v, lse, offsets, edges, None)
    if direct:
        dq, dk, dv, _ = _backward_call(c, True)(*args, scale)
    else:  # XLA has no uninitialized inputs: the whole workspace is zeroed
        ws = jnp.zeros((b, h, workspace_size(sq, sk, d)), jnp.float32)
        dq, dk, dv, _ = _backward_call(c, False)(*args, ws, scale)
    return dq, dk, dv
