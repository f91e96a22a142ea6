"""FlashAttention-4's block sparsity (FlexAttention's ``BlockMask`` form) for
:func:`cutecall.attention.attention`: :class:`BlockSparseTensors`, its
checks, and the layout its arrays reach FA4's kernels in.

FA4 skips the (q block, kv block) pairs a block mask leaves out: per query
block, ``mask_block_cnt``/``mask_block_idx`` list the kv blocks where the
``mask_mod`` runs, ``full_block_cnt``/``full_block_idx`` those it need not
(fully visible). The backward reads the transpose (per kv block, its query
blocks): ``block_sparse_tensors_bwd``, the same type, as FA4's
``flash_attn_func`` takes them. The arrays are runtime values; the
:class:`~cutecall.attention.config.Config` holds only their pattern: the
block sizes and (through ``pack_gqa``) whether heads broadcast -- so one
compile serves every sequence length. Full blocks or not launch the same
four arrays (zero full counts when none are given).

FA4's interface decides, and cutecall follows (``_flash_attn_fwd``,
``_flash_attn_bwd``, ``flash_attn.cute.block_sparsity``):

* sm90 forward: tiles from ``_tile_size_fwd_sm90(sparse_block_size_q=)``
  fitted by ``_fit_sm90_fwd_tile_to_block_sparsity``; the kv block must be
  the tile's n; ``q_subtile_factor = q_block / tile_m``;
* sm100 forward: 128x128 tiles, the q block a multiple of ``q_stage *
  128`` (256 when a KV head's queries exceed one tile), the kv block a
  multiple of 128 (``kv_subtile_factor``); no 2-CTA, no S ping-pong;
* PackGQA only when the masks broadcast over heads (head extent 1);
* backward: sm90's tiles from ``_tile_size_bwd_sm90(sparse_block_size_q=)``;
  sm100's 2-CTA only for an even ``kv_subtile_factor``
  (``block_sparse_bwd_supports_2cta``; head dim 192 requires it); none on
  sm120 ("Block sparsity backward not supported on SM 12.0"), none on
  sm100's dedicated hd256 kernel, none with packed sequences.

Arrays with batch or head extent 1 broadcast (FA4 expands them with stride
0; XLA arrays have no strides, so they are broadcast to (B, H, ...) before
the launch: same results, the same one kernel). FA4's ``block_size=None``
(inferred from the extents) is not taken: the block size is compile-time
here, so it is given (default (128, 128), FlexAttention's).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import Any

from .limits import fail

__all__ = ["BlockSparseTensors"]

ARRAYS = ("mask_block_cnt", "mask_block_idx", "full_block_cnt", "full_block_idx")


@dataclasses.dataclass(frozen=True)
class BlockSparseTensors:
    """FA4's ``BlockSparseTensorsTorch`` as JAX arrays (int32), for
    ``attention(block_sparse_tensors=..., block_sparse_tensors_bwd=...)``.

    Forward (per query block): counts (B|1, H|1, M), indices (B|1, H|1, M,
    N') with M = ceil(Sq / block_size[0]), N' <= ceil(Sk / block_size[1]).
    Backward (per kv block): counts (B|1, H|1, N), indices (B|1, H|1, N,
    M') with N = ceil(Sk / block_size[1]), M' <= ceil(Sq / block_size[0]).
    ``full_*`` are optional (both or neither; without them zero counts are
    passed, the same as no full blocks). ``block_size`` (q, kv) is
    static: a JAX pytree node carries it as aux data, so the value can be
    an argument of a jitted function. (The node is registered when the
    first one is made: importing ``cutecall.attention`` imports no JAX.)
    """

    mask_block_cnt: Any
    mask_block_idx: Any
    full_block_cnt: Any = None
    full_block_idx: Any = None
    block_size: tuple = (128, 128)

    def __post_init__(self):
        _register_pytree()


@functools.cache
def _register_pytree() -> None:
    import jax

    def flatten(t):
        return tuple(getattr(t, f) for f in ARRAYS), tuple(t.block_size)

    def unflatten(block_size, arrays):
        return BlockSparseTensors(*arrays, block_size=block_size)
    jax.tree_util.register_pytree_node(BlockSparseTensors, flatten, unflatten)


def pattern(t, arg: str) -> tuple:
    """Checks what the Config holds of `t` (its type, dtypes, ranks, block
    size); returns (block_size, head extent of the counts), or ((), 0) for
    None. Full blocks or not is no part of it: both launch four arrays
    (:func:`launch_tuple`)."""
    if t is None:
        return (), 0
    if not isinstance(t, BlockSparseTensors):
        fail(f"{arg} must be a cutecall.attention.BlockSparseTensors, got "
             f"{type(t).__name__}: {t!r}")
    bs = t.block_size
    if not (isinstance(bs, (tuple, list)) and len(bs) == 2 and all(
            isinstance(x, numbers.Integral) and not isinstance(x, bool) and x > 0 for x in bs)):
        fail(f"{arg}.block_size must be a pair of Python ints > 0 (q, kv), got {bs!r}")
    if (t.full_block_cnt is None) != (t.full_block_idx is None):
        fail(f"{arg}: full_block_cnt and full_block_idx must both be given or both be None")
    for name in ARRAYS:
        x = getattr(t, name)
        if x is None:
            continue
        shape = getattr(x, "shape", None)
        if shape is None or not hasattr(x, "dtype"):
            fail(f"{arg}.{name} must be an array, got {type(x).__name__}")
        rank = 3 if name.endswith("cnt") else 4
        if str(x.dtype) != "int32" or len(shape) != rank:
            fail(f"{arg}.{name} must be int32 of rank {rank}, got {x.dtype} {tuple(shape)}")
    return (int(bs[0]), int(bs[1])), t.mask_block_cnt.shape[1]


def check_shapes(t, arg: str, batch: int, heads: int, rows: int, cols: int) -> None:
    """FA4's shape rules (``infer_block_sparse_expected_shapes``,
    ``normalize_block_sparse_tensors``): counts (B|1, H|1, rows), indices
    (B|1, H|1, rows, <= cols)."""
    for kind in ("mask", "full"):
        cnt, idx = getattr(t, f"{kind}_block_cnt"), getattr(t, f"{kind}_block_idx")
        if cnt is None:
            continue
        want = f"(B|1, H|1, {rows}) and (B|1, H|1, {rows}, <= {cols}) with B = {batch}, " \
               f"H = {heads}"
        cs, xs = tuple(cnt.shape), tuple(idx.shape)
        lead_ok = all(s in (n, 1) for s, n in zip(cs[:2] + xs[:2], (batch, heads) * 2))
        if not lead_ok or cs[2] != rows or xs[2] != rows or xs[3] > cols:
            fail(f"{arg}.{kind}_block_cnt/{kind}_block_idx must be {want}, got {cs} and {xs}")


def check_forward(c, t, batch: int, heads: int, seqlen_q: int, seqlen_k: int) -> None:
    """FA4's ``normalize_block_sparse_config`` for the forward tiles of `c`."""
    q_block, kv_block = c.sparse_block
    arg = "block_sparse_tensors"
    tile_m, tile_n = c.fwd.m_block_size, c.fwd.n_block_size
    base_m = c.fwd.q_stage * tile_m if c.family == "sm100" else tile_m
    if kv_block % tile_n or (c.family == "sm90" and kv_block != tile_n):
        need = "equal" if c.family == "sm90" else "be a multiple of"
        fail(f"{arg}.block_size[1]={kv_block}: FA4's {c.family} forward needs it to "
             f"{need} its tile_n={tile_n} (on {c.arch})")
    if q_block % base_m:
        fail(f"{arg}.block_size[0]={q_block}: FA4's {c.family} forward needs a multiple of "
             f"{base_m} (q_stage * tile_m on {c.arch}; q_stage is 2 when a KV head's queries "
             "exceed one tile on sm100)")
    check_shapes(t, arg, batch, heads, _cdiv(seqlen_q, q_block), _cdiv(seqlen_k, kv_block))


def check_backward(c, t, batch: int, heads: int, seqlen_q: int, seqlen_k: int) -> None:
    """FA4's ``_flash_attn_bwd`` / ``normalize_block_sparse_config_bwd``
    block rules for the backward tiles of `c`."""
    q_block, kv_block = c.sparse_bwd_block
    arg = "block_sparse_tensors_bwd"
    tile_m, tile_n = c.bwd.m_block_size, c.bwd.n_block_size
    if q_block % tile_m:
        fail(f"{arg}.block_size[0]={q_block}: FA4's {c.family} backward needs a multiple "
             f"of its tile_m={tile_m} (on {c.arch})")
    if kv_block % tile_n or (c.family == "sm90" and kv_block != tile_n):
        need = "equal" if c.family == "sm90" else "be a multiple of"
        fail(f"{arg}.block_size[1]={kv_block}: FA4's {c.family} backward needs it to "
             f"{need} its tile_n={tile_n} (on {c.arch})")
    check_shapes(t, arg, batch, heads, _cdiv(seqlen_k, kv_block), _cdiv(seqlen_q, q_block))


def launch_tuple(t, batch: int, heads: int):
    """FA4's launcher argument: ``(mask_cnt, mask_idx, full_cnt, full_idx,
    None x 4)`` (no varlen offsets, no deterministic write orders), each
    array broadcast to (B, H, ...); None for None. Without full blocks, zero
    full-block counts: FA4's sm90 forward traces its full-block loop behind
    a run-time count, and fails to compile on a None index list."""
    if t is None:
        return None
    import jax.numpy as jnp

    def broadcast(x):
        return jnp.broadcast_to(x, (batch, heads) + x.shape[2:])
    mask_cnt, mask_idx = broadcast(t.mask_block_cnt), broadcast(t.mask_block_idx)
    if t.full_block_cnt is None:
        full_cnt, full_idx = jnp.zeros_like(mask_cnt), jnp.zeros_like(mask_idx[..., :1])
    else:
        full_cnt, full_idx = broadcast(t.full_block_cnt), broadcast(t.full_block_idx)
    return (mask_cnt, mask_idx, full_cnt, full_idx) + (None,) * 4


def _cdiv(n: int, d: int) -> int:
    return -(-n // d)
