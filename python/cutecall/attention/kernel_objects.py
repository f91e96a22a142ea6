"""FlashAttention-4's kernel objects for a :class:`Config`, built the way
``flash_attn.cute.interface`` builds them for the Config's arch, argument
for argument (``_flash_attn_fwd``, ``_flash_attn_bwd``,
``_compile_bwd_preprocess``, ``_compile_bwd_postprocess``,
``_flash_attn_fwd_combine``), under ``cutecall.current_target(arch)
.building()``: the DSL's arch is the target's and what a constructor reads
of the GPU answers with the target device, on any host.

A new object per call: FA4 keeps what it traces on the object.
"""

from __future__ import annotations

import math

from .config import Config

__all__ = ["forward_kernel", "preprocess_kernel", "backward_kernel",
           "postprocess_kernel", "combine_kernel"]


def building(c: Config):
    """The context FA4's objects for `c` are built in (its target)."""
    import cutecall
    return cutecall.current_target(c.arch).building()


def forward_kernel(c: Config):
    """The forward as ``_flash_attn_fwd`` builds it for `c`'s arch."""
    with building(c):
        if c.family == "sm90":
            return _forward_sm90(c)
        if c.family == "sm100":
            return _forward_sm100(c)
        return _forward_sm80(c)


def _forward_sm90(c: Config):
    """PackGQA when several query heads share a KV head; cp.async K/V when
    the page size is not the tile's."""
    from flash_attn.cute.flash_fwd_sm90 import FlashAttentionForwardSm90
    cfg = c.fwd
    return FlashAttentionForwardSm90(
        c.cutlass_dtype(), c.hdim, c.dv, c.qhead_per_kvhead,
        is_causal=c.causal, is_local=c.local, pack_gqa=c.packs_gqa,
        tile_m=cfg.m_block_size, tile_n=cfg.n_block_size, num_stages=2,
        num_threads=384, Q_in_regs=False,
        intra_wg_overlap=cfg.intra_wg_overlap, mma_pv_is_rs=cfg.mma_pv_is_rs,
        mask_mod=c.mask_mod, score_mod=c.fwd_score_mod(),
        has_aux_tensors=c.has_aux, q_subtile_factor=c.subtile_factors[0],
        paged_kv_non_tma=c.paged_kv and not c.paged_kv_tma)


def _forward_sm100(c: Config):
    """Q stages, 2-CTA, the scheduler, S ping-pong and split-KV as
    :mod:`~cutecall.attention.selection` picked them."""
    from flash_attn.cute.flash_fwd_sm100 import FlashAttentionForwardSm100
    tile_m, tile_n = c.tile
    return FlashAttentionForwardSm100(
        c.hdim, c.dv, qhead_per_kvhead=c.qhead_per_kvhead, is_causal=c.causal,
        is_local=c.local, is_split_kv=c.num_splits > 1, pack_gqa=c.packs_gqa,
        m_block_size=tile_m, n_block_size=tile_n, q_stage=c.q_stage,
        is_static_persistent=c.persistent, score_mod=c.fwd_score_mod(),
        mask_mod=c.mask_mod, has_aux_tensors=c.has_aux,
        paged_kv_non_tma=c.paged_kv and not c.paged_kv_tma, is_varlen_q=c.varlen_q,
        q_subtile_factor=c.subtile_factors[0], kv_subtile_factor=c.subtile_factors[1],
        use_2cta_instrs=c.two_cta,
        use_clc_scheduler=c.clc, seqlen_k_per_split=None,
        has_tile_count_semaphore=False, use_s_ping_pong=c.s_ping_pong)


def _forward_sm80(c: Config):
    """sm80/sm120: SM80 MMA, 128 threads, one stage (sm120: its own class,
    for 99 KB of shared memory)."""
    from flash_attn.cute.flash_fwd import FlashAttentionForwardSm80
    from flash_attn.cute.flash_fwd_sm120 import FlashAttentionForwardSm120
    cls = FlashAttentionForwardSm120 if c.family == "sm120" else FlashAttentionForwardSm80
    tile_m, tile_n = c.tile
    return cls(c.cutlass_dtype(), c.hdim, c.dv, c.qhead_per_kvhead, is_causal=c.causal,
               is_local=c.local, pack_gqa=c.packs_gqa, tile_m=tile_m, tile_n=tile_n,
               num_stages=1, num_threads=128, Q_in_regs=False,
               score_mod=c.fwd_score_mod(), mask_mod=c.mask_mod,
               has_aux_tensors=c.has_aux)


def preprocess_kernel(c: Config):
    """``FlashAttentionBackwardPreprocess``: dPsum = rowsum(dO * O) - dLSE,
    LSE in log2, dQaccum zeroed (none with sm100's hd256 backward)."""
    from flash_attn.cute.flash_bwd_preprocess import FlashAttentionBackwardPreprocess
    with building(c):
        return FlashAttentionBackwardPreprocess(
            c.cutlass_dtype(), c.hdim, c.dv, c.bwd.m_block_size,
            use_padded_offsets=True, nheads_major=False, pack_gqa=False,
            qhead_per_kvhead=1, nheads_kv=1, hdim_multiple_of=c.hdim_multiple_of)


def backward_kernel(c: Config):
    """The main backward as ``_flash_attn_bwd`` builds it for `c`'s arch."""
    score_mod, score_mod_bwd = c.bwd_score_mods()
    with building(c):
        if c.family == "sm90":
            return _backward_sm90(c, score_mod, score_mod_bwd)
        if c.family == "sm120":
            from flash_attn.cute.flash_bwd_sm120 import FlashAttentionBackwardSm120
            cfg = c.bwd
            return FlashAttentionBackwardSm120(
                c.cutlass_dtype(), c.hdim, c.dv, c.qhead_per_kvhead, cfg.m_block_size,
                cfg.n_block_size, cfg.num_stages_Q, cfg.num_stages_dO, 128, False,
                c.causal, c.local, cfg.SdP_swapAB, cfg.dKV_swapAB, cfg.dQ_swapAB,
                cfg.AtomLayoutMSdP, cfg.AtomLayoutNdKV, cfg.AtomLayoutMdQ,
                V_in_regs=False, score_mod=score_mod, score_mod_bwd=score_mod_bwd)
        return _backward_sm100(c, score_mod, score_mod_bwd)


def _backward_sm90(c: Config, score_mod, score_mod_bwd):
    from flash_attn.cute.flash_bwd_sm90 import FlashAttentionBackwardSm90
    cfg = c.bwd
    return FlashAttentionBackwardSm90(
        c.cutlass_dtype(), c.hdim, c.dv, c.qhead_per_kvhead, c.causal,
        is_local=c.local, deterministic=False, tile_m=cfg.m_block_size,
        tile_n=cfg.n_block_size, Q_stage=cfg.num_stages_Q,
        dO_stage=cfg.num_stages_dO, PdS_stage=cfg.num_stages_PdS,
        SdP_swapAB=cfg.SdP_swapAB, dKV_swapAB=cfg.dKV_swapAB,
        dQ_swapAB=cfg.dQ_swapAB, AtomLayoutMSdP=cfg.AtomLayoutMSdP,
        AtomLayoutNdKV=cfg.AtomLayoutNdKV, AtomLayoutMdQ=cfg.AtomLayoutMdQ,
        num_threads=(cfg.num_wg + 1) * 128, V_in_regs=False,
        score_mod=score_mod, score_mod_bwd=score_mod_bwd, mask_mod=c.mask_mod,
        has_aux_tensors=c.has_aux, q_subtile_factor=c.bwd_subtile_factors[0],
        dQ_single_wg=cfg.dQ_single_wg)


def _backward_sm100(c: Config, score_mod, score_mod_bwd):
    """``FlashAttentionBackwardSm100`` (2-CTA in a cluster of 2 from head
    dim 128), or for hd256 FA4's dedicated kernel, which writes dQ itself."""
    common = dict(is_causal=c.causal, is_local=c.local, qhead_per_kvhead=c.qhead_per_kvhead,
                  deterministic=False, cluster_size=c.bwd_cluster,
                  use_2cta_instrs=c.bwd_2cta, score_mod=score_mod,
                  score_mod_bwd=score_mod_bwd, mask_mod=c.mask_mod,
                  has_aux_tensors=c.has_aux, q_subtile_factor=c.bwd_subtile_factors[0])
    if c.bwd_hd256:
        from flash_attn.cute.sm100_hd256_2cta_fmha_backward import (
            BlackwellFusedMultiHeadAttentionBackward)
        return BlackwellFusedMultiHeadAttentionBackward(
            c.hdim, c.dv, is_persistent=False, tile_m_dq=128, tile_n_dq=128,
            tile_m_dkdv=128, tile_n_dkdv=64, **common)
    from flash_attn.cute.flash_bwd_sm100 import FlashAttentionBackwardSm100
    return FlashAttentionBackwardSm100(
        c.hdim, c.dv, tile_m=c.bwd.m_block_size, tile_n=c.bwd_tile_n, spt=False,
        kv_subtile_factor=c.bwd_subtile_factors[1], **common)


def postprocess_kernel(c: Config, which: str):
    """``FlashAttentionBackwardPostprocess``: a float32 accumulator to the
    output dtype, times a scale; ``which`` is "dq", "dkv" (GQA's dK, and dV
    when Dv = D, tiled along the keys) or "dv" (dV when Dv != D), as
    ``_bwd_postprocess_convert`` builds them. On sm100 the accumulators are
    read in the tile order the backward wrote them (``accum_tile_orders``),
    dK/dV per cluster."""
    cfg = c.bwd
    dq = which == "dq"
    order = None
    if c.family == "sm100":
        from flash_attn.cute.flash_bwd_sm100 import FlashAttentionBackwardSm100
        orders = FlashAttentionBackwardSm100.accum_tile_orders(c.bwd_2cta, c.bwd_tile_n)
        order = orders[0 if dq else 1]
    if dq:
        tile, atom, swap, threads = (cfg.m_block_size, cfg.AtomLayoutMdQ, cfg.dQ_swapAB,
                                     c.dq_post_threads)
    else:
        tile, atom, swap, threads = (cfg.n_block_size, cfg.AtomLayoutNdKV, cfg.dKV_swapAB,
                                     c.dkv_post_threads)
    from flash_attn.cute.flash_bwd_postprocess import FlashAttentionBackwardPostprocess
    with building(c):
        return FlashAttentionBackwardPostprocess(
            c.cutlass_dtype(), c.dv if which == "dv" else c.hdim, c.fa4_arch, tile,
            threads, atom, swap, use_2cta_instrs=dq and c.bwd_2cta,
            cluster_size=1 if dq else c.bwd_cluster,
            hdim_multiple_of=c.hdim_multiple_of, accum_order=order)


def combine_kernel(c: Config, heads: int):
    """``FlashAttentionForwardCombine`` as ``_flash_attn_fwd_combine`` builds
    it for `c.num_splits` float32 partials of `heads` query heads (its tile
    and the most splits it reduces follow from the head dim and the
    splits)."""
    from cutlass import Float32
    from flash_attn.cute.flash_fwd_combine import FlashAttentionForwardCombine
    k_block = 64 if c.dv <= 64 else 128
    tile_m = 8 if k_block % 128 == 0 else (16 if k_block % 64 == 0 else 32)
    log_max_splits = max(math.ceil(math.log2(c.num_splits)), 4)
    if tile_m == 8:  # a tile of 8 rows reduces at least 32 splits
        log_max_splits = max(log_max_splits, 5)
    with building(c):
        return FlashAttentionForwardCombine(
            dtype=c.cutlass_dtype(), dtype_partial=Float32, head_dim=c.dv,
            num_head=heads, tile_m=tile_m, k_block_size=k_block,
            log_max_splits=log_max_splits)
