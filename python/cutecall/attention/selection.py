"""What FlashAttention-4's interface picks for one call on its target:
:func:`select` fills a :class:`~cutecall.attention.config.Config`'s
target fields the way ``_flash_attn_fwd`` / ``_get_fwd_config`` and
``_flash_attn_bwd`` decide them for the arch, decision for decision.

On sm100 several of FA4's choices depend on the call's extents, not only
on its options: two Q tiles per CTA (``q_stage``) unless the queries of a
KV head fit one tile (decode), 2-CTA MMA and the static persistent
scheduler unless the queries fit one block, the split-KV heuristic (SM
count, blocks of keys) and hd256's PackGQA. Each is a bucket: the Config
records the decision, not the extents, so one compile per bucket serves
every shape in it (cutecall keeps extents runtime values). On sm90 and the
sm80 family nothing depends on extents.

FA4's environment switches (``FA_CLC``, ``FA_DISABLE_2CTA``,
``FA_DISABLE_S_PING_PONG``, ``FLASH_ATTENTION_HD256_GENERIC_BWD``,
``FLASH_ATTENTION_BWD_TILE_N``) are read through FA4's own getters, as its
interface reads them. The SM count is the target device's
(``cutecall.current_target().device``), never the compiling host's.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from . import archs


@dataclasses.dataclass(frozen=True)
class Extents:
    """The call's extents FA4's selection reads (``_flash_attn_fwd``'s
    names): B, sequence lengths (``seqlen_q`` None when packed), heads,
    the page size and pages per sequence (paged KV), the max_seqlen hints
    as given, the resolved window sizes and ``num_splits`` as given."""

    batch: int
    seqlen_q: Optional[int]
    total_q: int
    heads: int
    heads_kv: int
    seqlen_k: int
    page_size: Optional[int] = None
    pages_per_seq: int = 0
    max_seqlen_q: Optional[int] = None
    max_seqlen_k: Optional[int] = None
    window: tuple = (None, None)
    num_splits: int = 1
    sparse_heads: int = 0  # the head extent of block_sparse_tensors' counts

    def seqlen_q_bound(self, cu_seqlens_q: bool) -> int:
        """FA4's host max_seqlen_q: the hint, else seqlen_q or total_q."""
        if self.max_seqlen_q is not None:
            return self.max_seqlen_q
        return self.total_q if cu_seqlens_q else self.seqlen_q


def select(c, target, x: Extents):
    """`c` for `target` (a ``cutecall.Target``): the arch, its SM count and
    FA4's choices for the call `x`."""
    fam = archs.family(target.arch)
    c = dataclasses.replace(c, arch=target.arch, sms=int(target.device.sm_count))
    if fam in ("sm80", "sm120"):
        c = dataclasses.replace(c, tile=archs.fwd_tile(fam, c.hdim))
    elif fam == "sm100":
        c = dataclasses.replace(c, **_sm100_forward(c, x), **_sm100_backward(c))
    if c.sparse_block and c.packs_gqa and x.sparse_heads != 1:
        # FA4: PackGQA reads one mask per KV head, so only head-broadcast masks
        c = dataclasses.replace(c, pack_gqa=False)
    return c


def _loaded_keys(c, x: Extents, max_k: int, tile_m: int) -> int:
    """Keys a query tile loads (``seqlen_k_loaded``): all, or its window."""
    if not c.local:
        return max_k
    left, right = x.window
    span = (max_k if right is None else right) + (max_k if left is None else left)
    return max(0, min(max_k, span + 1 + tile_m))


def _splits(c, x: Extents, loaded: int, tile_m: int, q_stage: int, pack: bool) -> tuple:
    """(num_splits, tile_n): ``_get_fwd_config``'s split-KV choice on sm100."""
    from flash_attn.cute.interface import num_splits_heuristic
    g = c.qhead_per_kvhead
    rows = x.seqlen_q_bound(c.cu_seqlens_q) * (g if pack else 1)
    m_blocks = _cdiv(rows, q_stage * tile_m)
    total_mblocks = x.batch * x.heads_kv * (1 if pack else g) * m_blocks
    tile_n = 128
    n_blocks = _cdiv(loaded, tile_n)
    splits = x.num_splits
    if splits < 1:
        splits = num_splits_heuristic(total_mblocks, c.sms, n_blocks, 128)
    if c.hdim != c.dv and splits > 1:  # float32 partials: (192, 128) needs 128x64
        if n_blocks >= 64:
            tile_n = 64
            splits = num_splits_heuristic(total_mblocks, c.sms, _cdiv(loaded, tile_n), 128)
        else:
            splits = 1
    return splits, tile_n


def _sm100_forward(c, x: Extents) -> dict:
    """``_flash_attn_fwd``'s choices for arch 10x/11x (no fp8, qv or
    scheduler metadata: cutecall.attention passes none). Block sparsity
    turns 2-CTA and S ping-pong off (and PackGQA, in :func:`select`)."""
    from flash_attn.cute import utils
    from flash_attn.cute.interface import S_PING_PONG_MIN_N_BLOCKS_PER_SPLIT
    d, dv, g = c.hdim, c.dv, c.qhead_per_kvhead
    hd256 = d == 256 and dv == 256
    max_q = x.seqlen_q_bound(c.cu_seqlens_q)
    max_k = x.max_seqlen_k if x.max_seqlen_k is not None else (
        x.pages_per_seq * x.page_size if c.paged_kv else x.seqlen_k)
    pack = g > 1
    if hd256 and 128 % g and not c.seqused_q and (
            max_q > 128 or (x.num_splits == 1 and 2 * x.batch * x.heads <= c.sms)):
        pack = False  # FA4 prefers 2-CTA over cp.async-Q PackGQA for hd256
    tile_m = 128
    q_stage = 2 if max_q * (g if pack else 1) > tile_m and dv != 256 else 1
    loaded = _loaded_keys(c, x, max_k, tile_m)
    splits, tile_n = _splits(c, x, loaded, tile_m, q_stage, pack)
    one_block = max_q * (g if pack else 1) <= q_stage * tile_m
    split = splits > 1
    page = x.page_size if c.paged_kv else None
    two_cta = (
        not utils._get_disable_2cta_default(is_fwd=True) and not split
        and (not c.cu_seqlens_q or hd256) and not c.seqused_q and page in (None, 128)
        and (not one_block or (hd256 and 2 * x.batch * (x.heads_kv if pack else x.heads)
                               <= c.sms))
        and (tile_m % g == 0 or not pack) and not c.sparse_block
        and (hd256 or (not c.causal and not c.local and _ceil16(d) in (128, 192)
                       and _ceil16(dv) == 128)))
    clc = (utils._get_use_clc_scheduler_default() and not (c.varlen and g == 1)
           and not (not c.varlen and not c.causal and not c.local)
           and not (hd256 and two_cta))
    persistent = (not c.causal and not c.local and not c.varlen_q and not split) or (
        one_block and not split and (not c.cu_seqlens_q or x.max_seqlen_q is not None)
        and not (two_cta and not c.cu_seqlens_q and (c.causal or c.local)))
    per_split = _cdiv(_cdiv(loaded, tile_n), splits)
    ping_pong = (
        not utils._get_disable_s_ping_pong_default() and q_stage == 1
        and d in (64, 128, 256) and dv == d and tile_m == 128 and tile_n == 128
        and page in (None, tile_n) and not c.softcap and c.score_mod is None
        and c.mask_mod is None and not c.sink_dtype and not c.sparse_block
        and (splits == 1 or per_split >= S_PING_PONG_MIN_N_BLOCKS_PER_SPLIT.get(d, math.inf)))
    return dict(tile=(tile_m, tile_n), pack_gqa=pack, q_stage=q_stage, two_cta=two_cta,
                persistent=persistent, clc=clc, s_ping_pong=ping_pong, num_splits=splits)


def _sm100_backward(c) -> dict:
    """``_flash_attn_bwd``'s choices for arch 10x/11x (not deterministic):
    tiles 128x128 (hd256 on the general kernel: 128x64), 2-CTA from head
    dim 128 on -- with block-sparse tensors only when a kv block covers an
    even number of tiles (``block_sparse_bwd_supports_2cta``) --, hd256 on
    FA4's dedicated kernel."""
    from flash_attn.cute import utils
    d, dv = c.hdim, c.dv
    hd256 = d == 256 and dv == 256
    generic = hd256 and utils._get_hd256_generic_bwd()
    tile_n = 64 if generic else 128
    two_cta = d >= 128 and not utils._get_disable_2cta_default()
    if c.sparse_bwd_block:
        kv = c.sparse_bwd_block[1]
        two_cta = two_cta and kv % tile_n == 0 and (kv // tile_n) % 2 == 0
    if (utils._get_bwd_tile_n_override() == 64 and two_cta and d <= 128 and dv <= 128
            and all(-(-x // 32) * 32 % 64 == 0 for x in (d, dv)) and not c.sparse_bwd_block):
        tile_n = 64
    dedicated = hd256 and not generic
    return dict(bwd_tile_n=tile_n, bwd_cluster=2 if two_cta else 1,
                bwd_2cta=two_cta or dedicated, bwd_hd256=dedicated)


def _cdiv(n: int, d: int) -> int:
    return -(-n // d)


def _ceil16(n: int) -> int:
    return _cdiv(n, 16) * 16
