"""cuDNN's sm90 block-sparse attention kernels as ``cutlass_call``s, for
:func:`cutecall.attention.block_sparse_attention` (which validates the
arguments first).

Each kernel object is built as cuDNN's torch path builds it
(``cudnn.block_sparse_attention._interface._bsa_attn_fwd_sm90_blk128``,
``_bsa_attn_bwd_sm90_blk128``, ``build_bucketed_k2q_csr_cutedsl``) and
handed to ``cutecall.cutlass_call`` unchanged: output shapes follow the
arguments and every spec's divisibility holds for every accepted shape, so
one compile per :class:`Config` (and kernel) serves all shapes.
"""

from __future__ import annotations

import dataclasses
import functools

__all__ = ["Config", "forward_kernel", "backward_kernel", "csr_kernel", "workspace_size",
           "forward", "backward"]

BLOCK = 128          # cuDNN's sm90 blk128 sparse block (tokens)
HEAD_DIM = 128       # its sm90 backward is specialized for D = Dv = 128
BUCKET = 256         # _bsa_attn_bwd_sm90_blk128's default bucket (query blocks)
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
class Config:
    """What the kernels compile for (shapes are runtime): q's dtype name,
    the fixed count, the indices' capacity C, the layout, the CSR bucket."""
    dtype: str
    count: int
    capacity: int
    layout: str
    bucket: int


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
def forward(c: Config):
    """``(q, k, v, indices, scale) -> (o, lse)``, lse (B, H, Sq) float32: one ``cutlass_call``, shapes
    from the arguments (one compile serves every shape)."""
    import jax
    import jax.numpy as jnp

    import cutecall
    qko_mode, vi_mode = _FWD_MODES[c.layout]
    qko, vi = _spec(qko_mode, _token_div(c.layout)), _spec(vi_mode, _token_div(c.layout))

    def outputs(q, *_):
        b, h, s, _d = bhsd(c.layout, q.shape)
        return jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((b, h, s), jnp.float32)
    call = cutecall.cutlass_call(
        forward_kernel(HEAD_DIM, c.count), output_shape_dtype=outputs,
        input_spec=(qko, qko, vi, _spec(VI), _spec(), _spec()),
        output_spec=(qko, _spec(LSE, (1, 1, 4))), output_params=("o", "lse"),
        name=f"cudnn_bsa_fwd_sm90_{c.dtype}_{c.layout}")
    # counts and sizes are unused with a fixed count (cuDNN passes indices).
    return lambda q, k, v, idx, scale: call(q, k, v, idx, idx, idx, scale, c.count)


def bhsd(layout, shape):
    """`shape` as (B, H, S, D) from `layout`'s order."""
    shape = tuple(shape)
    return shape if layout == "bhsd" else (shape[0], shape[2], shape[1], shape[3])


@functools.lru_cache(maxsize=64)
def _csr(c: Config):
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
def _backward_call(c: Config, direct: bool):
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


def backward(c: Config, q, k, v, o, lse, indices, do, scale):
    """dq, dk, dv as ``_bsa_attn_bwd_sm90_blk128`` computes them."""
    import jax.numpy as jnp
    b, h, sq, d = bhsd(c.layout, q.shape)
    sk = bhsd(c.layout, k.shape)[2]
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
