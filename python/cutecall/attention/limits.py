"""What FlashAttention-4's kernels lack, per arch family: the forward's
limits raise when :func:`cutecall.attention.attention` is called, the
backward's when it is differentiated, each a ValueError naming the option
and the arch, before anything compiles.

They follow FA4's interface (``_flash_attn_fwd`` / ``_flash_attn_bwd``
assert the same) and its kernels' own ``can_implement`` (shared memory of
the sm80/sm120 tiles).
"""

from __future__ import annotations

from typing import Optional

from .archs import NAME, fwd_tile


def fail(message: str):
    raise ValueError(f"{NAME}: {message}")


def check_forward(c, num_splits: int) -> None:
    """Raises for an option `c`'s forward lacks on its arch (`num_splits`:
    as given; 0 asks FA4's heuristic, which is 1 where FA4 cannot split)."""
    fam, arch = c.family, c.arch
    on = f"on {arch} (FA4's {fam} forward)"
    if num_splits > 1 and fam != "sm100":
        fail(f"num_splits={num_splits} {on}: FA4 splits KV on sm100/sm103 only")
    if c.sparse_block or c.sparse_bwd_block:
        _sparse_forward(c, num_splits, on)
    if num_splits != 1 and c.varlen_q:
        fail(f"num_splits={num_splits} with cu_seqlens_q/seqused_q: FA4 plans varlen "
             "split-KV with its scheduler-metadata kernel, which cutecall does not run; "
             "use num_splits=1 or dense q")
    if fam not in ("sm80", "sm120"):
        return
    if c.paged_kv:
        fail(f"page_table {on}: FA4's sm80/sm120 forward has no paged KV")
    if c.sink_dtype:
        fail(f"learnable_sink {on}: FA4's sm80/sm120 forward has no learnable sink")
    if fam == "sm80" and c.score_mod is not None:
        fail(f"score_mod {on}: FA4 runs no user score_mod on sm8x (softcap works)")
    _fits(c, "forward", _fwd_fits(c))


def _sparse_forward(c, num_splits: int, on: str) -> None:
    """FA4's block sparsity: sm90 and sm100 forwards, dense layouts (its
    varlen block sparsity needs ``cu_total_m_blocks``, not wired here)."""
    arg = "block_sparse_tensors" if c.sparse_block else "block_sparse_tensors_bwd"
    if c.sparse_block and c.family not in ("sm90", "sm100"):
        fail(f"block_sparse_tensors {on}: FA4 runs block sparsity on sm90 and "
             "sm100/sm103 only")
    for name, given in (("cu_seqlens_q", c.cu_seqlens_q), ("cu_seqlens_k", c.cu_seqlens_k),
                        ("seqused_q", c.seqused_q), ("seqused_k", c.seqused_k),
                        ("page_table", c.paged_kv)):
        if given:
            fail(f"{arg} with {name}: cutecall runs FA4's block sparsity on dense "
                 "(B, S, H, D) layouts only (FA4's varlen form needs cu_total_m_blocks, "
                 "and its backward has none)")
    if num_splits != 1:
        fail(f"{arg} with num_splits={num_splits}: cutecall runs FA4's block-sparse "
             "forward unsplit (num_splits=1)")


def backward_unsupported(c, return_lse: bool = False) -> Optional[str]:
    """Why FA4's backward cannot differentiate `c` on its arch (naming the
    option and the arch), or None. `return_lse`: the LSE is an output (its
    cotangent reaches the backward)."""
    fam, arch = c.family, c.arch
    if c.paged_kv:
        return ("page_table: FA4's backward has no paged KV (its torch "
                "flash_attn_varlen_func is forward-only with page_table)")
    if c.score_mod is not None and c.score_mod_bwd is None:
        return ("score_mod without score_mod_bwd: FA4's backward needs the "
                "score_mod's derivative (score_mod_bwd=...)")
    if fam == "sm90" and c.qhead_per_kvhead > 1 and c.dv != c.hdim:
        return (f"head dims ({c.hdim}, {c.dv}) with GQA/MQA (qhead_per_kvhead="
                f"{c.qhead_per_kvhead}): FA4's sm90 backward requires head_dim "
                "== head_dim_v for GQA")
    if fam == "sm80":
        return (f"target arch {arch}: FA4's interface has no sm8x backward "
                "(its _flash_attn_bwd supports 9.x, 10.x, 11.x, 12.x)")
    if fam == "sm120":
        return _sm120_backward(c)
    if fam == "sm100" and c.bwd_hd256:
        return _hd256_backward(c, return_lse)
    if fam == "sm100" and c.sparse_bwd_block and c.hdim == 192 and not c.bwd_2cta:
        return (f"block_sparse_tensors_bwd with head dim 192 on {arch}: FA4's block-sparse "
                "backward needs 2-CTA, so block_size[1] must cover an even number of "
                f"{c.bwd_tile_n}-key tiles (got {c.sparse_bwd_block[1]}), and "
                "FA_DISABLE_2CTA unset")
    if fam == "sm100" and c.hdim == 256 and not c.bwd_2cta:
        return (f"head dim 256 on {arch}: FA4's sm100 backward needs 2-CTA, which "
                "FA_DISABLE_2CTA disabled")
    return None


def _sm120_backward(c) -> Optional[str]:
    on = f"on {c.arch} (FA4's sm120 backward)"
    if c.sparse_bwd_block:
        return (f"block_sparse_tensors_bwd {on}: FA4 asserts \"Block sparsity backward "
                "not supported on SM 12.0\"")
    for name, given in (("score_mod", c.score_mod), ("mask_mod", c.mask_mod)):
        if given is not None:
            return f"{name} {on}: not supported"
    if c.sink_dtype:
        return f"learnable_sink {on}: FA4 differentiates sinks on sm90/sm100 only"
    if not _bwd_fits(c):
        return (f"head dims ({c.hdim}, {c.dv}) {on}: its 64x64 tiles do not fit "
                "the shared memory (FA4's can_implement)")
    return None


def _hd256_backward(c, return_lse: bool) -> Optional[str]:
    on = f"with head dim 256 on {c.arch} (FA4's dedicated hd256 backward)"
    for name, given in (("softcap", c.softcap), ("score_mod", c.score_mod),
                        ("mask_mod", c.mask_mod), ("aux_tensors", c.has_aux),
                        ("block_sparse_tensors_bwd", c.sparse_bwd_block),
                        ("a sliding window (window_size)", c.local),
                        ("learnable_sink", c.sink_dtype),
                        ("return_lse (the LSE's cotangent)", return_lse)):
        if given:
            return f"{name} {on}: not supported"
    return None


def _fwd_fits(c) -> bool:
    from flash_attn.cute.flash_fwd import FlashAttentionForwardSm80
    from flash_attn.cute.flash_fwd_sm120 import FlashAttentionForwardSm120
    cls = FlashAttentionForwardSm120 if c.family == "sm120" else FlashAttentionForwardSm80
    tile_m, tile_n = fwd_tile(c.family, c.hdim)
    return cls.can_implement(c.cutlass_dtype(), c.hdim, c.dv, tile_m, tile_n, 1, 128,
                             c.causal, Q_in_regs=False)


def _bwd_fits(c) -> bool:
    from flash_attn.cute.flash_bwd_sm120 import FlashAttentionBackwardSm120
    cfg = c.bwd
    return FlashAttentionBackwardSm120.can_implement(
        c.cutlass_dtype(), c.hdim, c.dv, cfg.m_block_size, cfg.n_block_size,
        cfg.num_stages_Q, cfg.num_stages_dO, 128, c.causal, V_in_regs=False)


def _fits(c, what: str, ok: bool) -> None:
    if not ok:
        fail(f"head dims ({c.hdim}, {c.dv}) on {c.arch}: FA4's {c.family} {what} "
             f"tiles {fwd_tile(c.family, c.hdim)} do not fit the shared memory "
             "(its can_implement)")
