"""FlashAttention-4's Hopper (sm90) kernels, configured the way FA4's own
``flash_attn.cute.interface`` configures them, as ``cutlass_call``s.

:mod:`cutecall.attention` composes them into a differentiable
attention. Everything here is keyed by a :class:`Config`
(:mod:`~cutecall.attention.config`): FA4's kernel objects
depend on nothing else, so one compile per config serves every batch,
sequence length, head count and window size (cutecall keeps extents
dynamic; window sizes, the softmax scale and aux scalars are runtime
values). The constructor arguments are those of ``_flash_attn_fwd`` /
``_flash_attn_bwd`` for arch 9x, argument for argument.

FA4, the CuTe DSL and JAX are imported when a function runs.
"""

from __future__ import annotations

import functools

from cutecall._driver.dsl import dsl_arch

from .config import ARCH, DTYPES, Config, aux_data  # noqa: F401

__all__ = ["Config", "forward_kernel", "preprocess_kernel",
           "backward_kernel", "postprocess_kernel", "forward", "preprocess",
           "backward", "postprocess"]


# ---------------------------------------------------------------------------
# FA4's kernel objects (a new one per call: FA4 keeps what it traces on them)

def forward_kernel(c: Config):
    """``FlashAttentionForwardSm90`` as ``_flash_attn_fwd`` builds it on sm90
    (PackGQA when several query heads share a KV head; cp.async K/V when
    the page size is not the tile's)."""
    from flash_attn.cute.flash_fwd_sm90 import FlashAttentionForwardSm90
    cfg = c.fwd
    with dsl_arch(ARCH):
        return FlashAttentionForwardSm90(
            c.cutlass_dtype(), c.hdim, c.dv, c.qhead_per_kvhead,
            is_causal=c.causal, is_local=c.local, pack_gqa=c.qhead_per_kvhead > 1,
            tile_m=cfg.m_block_size, tile_n=cfg.n_block_size, num_stages=2,
            num_threads=384, Q_in_regs=False,
            intra_wg_overlap=cfg.intra_wg_overlap, mma_pv_is_rs=cfg.mma_pv_is_rs,
            mask_mod=c.mask_mod, score_mod=c.fwd_score_mod(),
            has_aux_tensors=c.has_aux, q_subtile_factor=1,
            paged_kv_non_tma=c.paged_kv and not c.paged_kv_tma)


def preprocess_kernel(c: Config):
    """``FlashAttentionBackwardPreprocess``: dPsum = rowsum(dO * O) - dLSE,
    LSE in log2, dQaccum zeroed."""
    from flash_attn.cute.flash_bwd_preprocess import FlashAttentionBackwardPreprocess
    with dsl_arch(ARCH):
        return FlashAttentionBackwardPreprocess(
            c.cutlass_dtype(), c.hdim, c.dv, c.bwd.m_block_size,
            use_padded_offsets=True, nheads_major=False, pack_gqa=False,
            qhead_per_kvhead=1, nheads_kv=1, hdim_multiple_of=c.hdim_multiple_of)


def backward_kernel(c: Config):
    """``FlashAttentionBackwardSm90`` as ``_flash_attn_bwd`` builds it."""
    from flash_attn.cute.flash_bwd_sm90 import FlashAttentionBackwardSm90
    cfg = c.bwd
    score_mod, score_mod_bwd = c.bwd_score_mods()
    with dsl_arch(ARCH):
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
            has_aux_tensors=c.has_aux, q_subtile_factor=2,
            dQ_single_wg=cfg.dQ_single_wg)


def postprocess_kernel(c: Config, which: str):
    """``FlashAttentionBackwardPostprocess``: a float32 accumulator to the
    output dtype, times a scale; ``which`` is "dq" or "dkv" (GQA's dK/dV,
    tiled along the keys), as ``_bwd_postprocess_convert`` builds them."""
    from flash_attn.cute.flash_bwd_postprocess import FlashAttentionBackwardPostprocess
    cfg = c.bwd
    if which == "dq":
        tile, atom, swap = cfg.m_block_size, cfg.AtomLayoutMdQ, cfg.dQ_swapAB
        threads = c.dq_post_threads
    else:
        tile, atom, swap = cfg.n_block_size, cfg.AtomLayoutNdKV, cfg.dKV_swapAB
        threads = cfg.num_wg * 128
    with dsl_arch(ARCH):
        return FlashAttentionBackwardPostprocess(
            c.cutlass_dtype(), c.hdim, 90, tile, threads, atom, swap,
            use_2cta_instrs=False, cluster_size=1,
            hdim_multiple_of=c.hdim_multiple_of, accum_order=None)


# ---------------------------------------------------------------------------
# The JAX calls: one per kernel and config (output shapes follow the
# arguments, so they serve every shape). vmap folds into the batch dim where
# every array's dim 0 is the batch; packed varlen and paged KV loop.

def _specs(inputs: list, outputs: list) -> dict:
    """Specs that make every extent a runtime value the kernel assumes
    nothing of, as FA4 compiles its kernels (``mark_layout_dynamic``) --
    except the contiguous dim's 16 bytes (``(rank, n)``: n elements), which
    FA4's vectorized copies need (its fake tensors say the same). So one
    compile serves every batch, length and head count, not one per
    divisibility class. `inputs`/`outputs`: ``(rank, n)`` per array leaf, or
    ``None`` (nothing assumed, any rank)."""
    import cutecall

    def spec(x):
        if x is None:
            return cutecall.TensorSpec(divisibility=1)
        rank, n = x
        return cutecall.TensorSpec(divisibility=(1,) * (rank - 1) + (n,))
    return dict(input_spec=[spec(x) for x in inputs],
                output_spec=[spec(x) for x in outputs])


def _ranks(c: Config) -> tuple:
    """(q, k, statistics, dK/dV accumulator) ranks for the config's layout."""
    return (3 if c.cu_seqlens_q else 4, 3 if c.cu_seqlens_k else 4,
            2 if c.cu_seqlens_q else 3, 2 if c.cu_seqlens_k else 3)


HALF, F32 = 8, 4  # elements in 16 bytes


def _sds(shape, dtype):
    import jax
    return jax.ShapeDtypeStruct(tuple(shape), dtype)


def _batching(c: Config, modes: list, outputs: int):
    """``BatchModes`` folding into dim 0 (``None``: an array shared by the
    batch), or "loop" where dim 0 is not the batch (packed sequences,
    a page pool)."""
    import cutecall
    if c.cu_seqlens_q or c.cu_seqlens_k or c.paged_kv:
        return "loop"
    return cutecall.BatchModes(inputs=tuple(modes), outputs=(0,) * outputs)


def _optional(c: Config, *flags) -> list:
    return [0] * sum(bool(f) for f in flags)


@functools.lru_cache(maxsize=64)
def forward(c: Config):
    """``(q, k, v, scale, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
    page_table, window_left, window_right, learnable_sink, aux) -> (o,
    lse)``: FA4's launcher arguments (``None`` where absent; blocksparse
    tensors always ``None``). lse is (B, H, Sq) float32, or (H, total_q)
    with cu_seqlens_q."""
    import cutecall

    def outputs(q, k, v, *_):
        o = _sds(q.shape[:-1] + (c.dv,), q.dtype)
        if c.cu_seqlens_q:
            return o, _sds((q.shape[1], q.shape[0]), "float32")
        b, s, h, _d = q.shape
        return o, _sds((b, h, s), "float32")

    modes = [0, 0, 0] + _optional(c, c.seqused_q, c.seqused_k) + \
        [None] * (bool(c.sink_dtype) + max(c.aux_tensors, 0))
    rq, rk, _, _ = _ranks(c)
    optional = sum((c.cu_seqlens_q, c.cu_seqlens_k, c.seqused_q, c.seqused_k, c.paged_kv,
                    bool(c.sink_dtype))) + max(c.aux_tensors, 0)
    specs = _specs([(rq, HALF), (rk, HALF), (rk, HALF)] + [None] * optional,
                   [(rq, HALF), None])
    call = cutecall.cutlass_call(
        forward_kernel(c), output_shape_dtype=outputs, output_params=("mO", "mLSE"),
        batch_modes=_batching(c, modes, 2), **specs, name=f"fa4_fwd_{c.tag()}")

    def run(q, k, v, scale, cu_q, cu_k, used_q, used_k, page_table, left, right,
            sink, aux):
        return call(q, k, v, scale, cu_q, cu_k, used_q, used_k, page_table,
                    left, right, sink, None, aux)
    return run


@functools.lru_cache(maxsize=64)
def preprocess(c: Config, with_dlse: bool):
    """``(o, do, lse, cu_seqlens_q, seqused_q, dlse) -> (dpsum, lse_log2,
    dq_accum)``: the statistics and the zeroed dQ accumulator
    (:meth:`Config.accum_shapes`)."""
    import cutecall

    def outputs(o, do, lse, cu_q, *_):
        batch = cu_q.shape[0] - 1 if c.cu_seqlens_q else o.shape[0]
        seqlen = o.shape[0] if c.cu_seqlens_q else o.shape[1]
        stat, acc = c.accum_shapes(batch, seqlen, o.shape[-2])
        return _sds(stat, "float32"), _sds(stat, "float32"), _sds(acc, "float32")
    modes = [0, 0, 0] + _optional(c, c.seqused_q, with_dlse)
    rq, _, rs, _ = _ranks(c)
    optional = sum((c.cu_seqlens_q, c.seqused_q, with_dlse))
    specs = _specs([(rq, HALF), (rq, HALF), None] + [None] * optional, [(rs, F32)] * 3)
    call = cutecall.cutlass_call(
        preprocess_kernel(c), output_shape_dtype=outputs,
        output_params=("mPdPsum", "mLSElog2", "mdQaccum"),
        batch_modes=_batching(c, modes, 3), **specs, name=f"fa4_bwd_preprocess_{c.tag()}")
    return lambda o, do, lse, cu_q, used_q, dlse: call(
        o, do, lse, cu_q, used_q, dlse, None, None, 1.0)


@functools.lru_cache(maxsize=64)
def backward(c: Config):
    """``(q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, scale,
    cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, window_left,
    window_right, aux) -> (dq_accum, dk, dv)``. MHA writes dK and dV (pass
    ``None`` for the accumulators); GQA accumulates them into float32
    buffers the caller zeroes (:meth:`Config.dkv_accum_shapes`), converted
    by the postprocess."""
    import cutecall
    gqa = c.qhead_per_kvhead > 1

    def outputs(q, k, v, do, lse_log2, dpsum, dq_accum, *rest):
        if gqa:  # rest: dk_acc, dv_acc, ...
            return (_sds(dq_accum.shape, "float32"), _sds(rest[0].shape, "float32"),
                    _sds(rest[1].shape, "float32"))
        return (_sds(dq_accum.shape, "float32"), _sds(k.shape, k.dtype),
                _sds(v.shape, v.dtype))
    modes = [0] * (9 if gqa else 7) + \
        _optional(c, c.seqused_q, c.seqused_k) + [None] * max(c.aux_tensors, 0)
    rq, rk, rs, ra = _ranks(c)
    accs = [(ra, F32)] * 2 if gqa else []
    optional = sum((c.cu_seqlens_q, c.cu_seqlens_k, c.seqused_q, c.seqused_k)) + \
        max(c.aux_tensors, 0)
    specs = _specs([(rq, HALF), (rk, HALF), (rk, HALF), (rq, HALF)] + [(rs, F32)] * 3 +
                   accs + [None] * optional,
                   [(rs, F32)] + (accs or [(rk, HALF)] * 2))
    call = cutecall.cutlass_call(
        backward_kernel(c), output_shape_dtype=outputs,
        input_output_aliases={6: 0, 7: 1, 8: 2} if gqa else {6: 0},
        output_params=None if gqa else ("mdK", "mdV"),
        batch_modes=_batching(c, modes, 3), **specs, name=f"fa4_bwd_{c.tag()}")

    def run(q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, scale,
            cu_q, cu_k, used_q, used_k, left, right, aux):
        tail = (scale, cu_q, cu_k, used_q, used_k, left, right, None, None, None,
                aux, None, None)
        if gqa:
            return call(q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, *tail)
        return call(q, k, v, do, lse_log2, dpsum, dq_accum, *tail)
    return run


def postprocess(c: Config, which: str):
    """``(accum, like, scale, cu_seqlens, seqused, sink) -> out`` (``like``
    gives out's shape and dtype); with ``sink = (dpsum, lse,
    learnable_sink)`` (dQ only) it returns ``(out, dsink)``, FA4 reducing
    the sink's gradient in the same launch."""
    def run(accum, like, scale, cu, used, sink=None):
        call = _postprocess(c, which, tuple(like.shape), str(like.dtype), sink is not None)
        if sink is None:
            return call(accum, scale, cu, used, None)
        from flash_attn.cute.flash_bwd_postprocess import LearnableSinkBwdTensors
        import jax.numpy as jnp
        dpsum, lse, s = sink
        return call(accum, scale, cu, used,
                    LearnableSinkBwdTensors(dpsum, lse, s, jnp.zeros(s.shape, s.dtype)))
    return run


@functools.lru_cache(maxsize=256)
def _postprocess(c: Config, which: str, shape: tuple, dtype: str, sink: bool):
    # One call object per output shape (the launcher's arguments do not say
    # it); they share one compiled kernel, whose extents are dynamic.
    import cutecall
    out = _sds(shape, dtype)
    varlen = c.cu_seqlens_q if which == "dq" else c.cu_seqlens_k
    used = c.seqused_q if which == "dq" else c.seqused_k
    modes = [0] + _optional(c, used)
    rank_out = _ranks(c)[0 if which == "dq" else 1]
    rank_acc = _ranks(c)[2 if which == "dq" else 3]
    ins = [(rank_acc, F32)] + [None] * sum((varlen, used))
    if sink:
        specs = _specs(ins + [(rank_acc, F32), None, None, None], [(rank_out, HALF), None])
        return cutecall.cutlass_call(
            postprocess_kernel(c, which),
            output_shape_dtype=lambda acc, scale, cu, u, st: (out, _sds(st.sink.shape,
                                                                         st.sink.dtype)),
            input_output_aliases={(4, "dsink"): 1}, output_params=("mdQ",),
            batch_modes="loop",  # dsink sums over the batch: no fold
            **specs, name=f"fa4_bwd_postprocess_{which}_{c.tag()}")
    return cutecall.cutlass_call(
        postprocess_kernel(c, which), output_shape_dtype=out,
        output_params=("mdQ",),
        batch_modes="loop" if varlen else _batching(c, modes, 1),
        **_specs(ins, [(rank_out, HALF)]), name=f"fa4_bwd_postprocess_{which}_{c.tag()}")
