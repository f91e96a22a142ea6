"""FlashAttention-4's Hopper (sm90) kernels, configured the way FA4's own
``flash_attn.cute.interface`` configures them, as ``cutlass_call``s.

:mod:`cutecall.examples.flash_attention` composes them into a differentiable
attention. Everything here is keyed by a :class:`Config` (dtype, head dim,
query heads per KV head, causal): FA4's kernel objects depend on nothing
else, so one compile per config serves every batch, sequence length and head
count (cutecall keeps extents dynamic). Tile shapes, stages and swaps come
from FA4's own ``_tile_size_fwd_sm90`` / ``_tile_size_bwd_sm90``.

FA4, the CuTe DSL and JAX are imported when a function runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

ARCH = "sm_90a"
DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128)


@dataclasses.dataclass(frozen=True)
class Config:
    """What FA4's kernel objects are built from."""

    dtype: str            # "bfloat16" or "float16"
    hdim: int             # 64 or 128 (q, k and v alike)
    qhead_per_kvhead: int  # 1: MHA; > 1: GQA/MQA
    causal: bool

    @property
    def fwd(self):
        from flash_attn.cute import interface
        return interface._tile_size_fwd_sm90(self.hdim, self.hdim, self.causal, False)

    @property
    def bwd(self):
        from flash_attn.cute import interface
        return interface._tile_size_bwd_sm90(self.hdim, self.hdim, self.causal, False)

    @property
    def hdim_multiple_of(self) -> int:
        return 64 if self.bwd.dKV_swapAB else 32  # _flash_attn_bwd, arch 9x

    @property
    def hdim_rounded(self) -> int:
        m = self.hdim_multiple_of
        return -(-self.hdim // m) * m

    @property
    def dq_post_threads(self) -> int:
        """The dQ postprocess's threads (``num_threads_post_dQ``)."""
        cfg = self.bwd
        return 128 if cfg.dQ_single_wg else cfg.num_wg * 128

    def accum_shapes(self, batch: int, seqlen: int, heads: int) -> tuple:
        """((B, H, Sr), (B, H, Sr * Dr)): the backward's statistics (dPsum,
        LSE_log2) and dQ accumulator, as ``_flash_attn_bwd`` allocates them
        (Sr: seqlen rounded up to tile_m; Dr: hdim to hdim_multiple_of)."""
        rows = _rounded(seqlen, self.bwd.m_block_size)
        return (batch, heads, rows), (batch, heads, rows * self.hdim_rounded)

    def cutlass_dtype(self):
        from cutecall import jax_to_cutlass_dtype
        return jax_to_cutlass_dtype(self.dtype)


def _rounded(n: int, tile: int) -> int:
    return -(-n // tile) * tile


@contextlib.contextmanager
def dsl_arch(arch: str = ARCH):
    """The CuTe DSL's target arch set to `arch`, restored afterwards.

    FA4's constructors read it (``BaseDSL._get_dsl().get_arch_enum()``:
    ``$CUTE_DSL_ARCH``, else the detected GPU, else sm_100a) and the sm90
    classes assert an sm_90a-family arch, so building them on a machine
    without a GPU needs it set. Process-wide DSL state: not thread-safe."""
    from cutlass.cutlass_dsl import BaseDSL
    envar = BaseDSL._get_dsl().envar
    saved = getattr(envar, "_arch", None)
    envar.arch = arch
    try:
        yield
    finally:
        envar.arch = saved


def _dsl_arch():
    return dsl_arch(ARCH)


# ---------------------------------------------------------------------------
# FA4's kernel objects (one per compile: FA4 keeps what it traces on them)

def forward_kernel(c: Config):
    """``FlashAttentionForwardSm90`` as ``_flash_attn_fwd`` builds it on sm90
    (PackGQA when several query heads share a KV head)."""
    from flash_attn.cute.flash_fwd_sm90 import FlashAttentionForwardSm90
    cfg = c.fwd
    with _dsl_arch():
        return FlashAttentionForwardSm90(
            c.cutlass_dtype(), c.hdim, c.hdim, c.qhead_per_kvhead,
            is_causal=c.causal, is_local=False, pack_gqa=c.qhead_per_kvhead > 1,
            tile_m=cfg.m_block_size, tile_n=cfg.n_block_size, num_stages=2,
            num_threads=384, Q_in_regs=False,
            intra_wg_overlap=cfg.intra_wg_overlap, mma_pv_is_rs=cfg.mma_pv_is_rs,
            mask_mod=None, score_mod=None, has_aux_tensors=False,
            q_subtile_factor=1, paged_kv_non_tma=False)


def preprocess_kernel(c: Config):
    """``FlashAttentionBackwardPreprocess``: dPsum = rowsum(dO * O), LSE in
    log2, dQaccum zeroed."""
    from flash_attn.cute.flash_bwd_preprocess import FlashAttentionBackwardPreprocess
    with _dsl_arch():
        return FlashAttentionBackwardPreprocess(
            c.cutlass_dtype(), c.hdim, c.hdim, c.bwd.m_block_size,
            use_padded_offsets=True, nheads_major=False, pack_gqa=False,
            qhead_per_kvhead=1, nheads_kv=1, hdim_multiple_of=c.hdim_multiple_of)


def backward_kernel(c: Config):
    """``FlashAttentionBackwardSm90`` as ``_flash_attn_bwd`` builds it."""
    from flash_attn.cute.flash_bwd_sm90 import FlashAttentionBackwardSm90
    cfg = c.bwd
    with _dsl_arch():
        return FlashAttentionBackwardSm90(
            c.cutlass_dtype(), c.hdim, c.hdim, c.qhead_per_kvhead, c.causal,
            is_local=False, deterministic=False, tile_m=cfg.m_block_size,
            tile_n=cfg.n_block_size, Q_stage=cfg.num_stages_Q,
            dO_stage=cfg.num_stages_dO, PdS_stage=cfg.num_stages_PdS,
            SdP_swapAB=cfg.SdP_swapAB, dKV_swapAB=cfg.dKV_swapAB,
            dQ_swapAB=cfg.dQ_swapAB, AtomLayoutMSdP=cfg.AtomLayoutMSdP,
            AtomLayoutNdKV=cfg.AtomLayoutNdKV, AtomLayoutMdQ=cfg.AtomLayoutMdQ,
            num_threads=(cfg.num_wg + 1) * 128, V_in_regs=False,
            score_mod=None, score_mod_bwd=None, mask_mod=None,
            has_aux_tensors=False, q_subtile_factor=2,
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
    with _dsl_arch():
        return FlashAttentionBackwardPostprocess(
            c.cutlass_dtype(), c.hdim, 90, tile, threads, atom, swap,
            use_2cta_instrs=False, cluster_size=1,
            hdim_multiple_of=c.hdim_multiple_of, accum_order=None)


# ---------------------------------------------------------------------------
# The JAX calls: one per kernel and config (output shapes follow the
# arguments, so they serve every shape); vmap folds into the batch dim.

def _sds(shape, dtype):
    import jax
    return jax.ShapeDtypeStruct(tuple(shape), dtype)


@functools.lru_cache(maxsize=None)
def forward(c: Config):
    """``(q, k, v, scale) -> (o, lse)``; q (B, Sq, H, D), k/v (B, Sk, Hkv, D),
    lse (B, H, Sq) float32."""
    import cutecall

    def outputs(q, k, v, scale):
        b, s, h, _ = q.shape
        return _sds(q.shape, q.dtype), _sds((b, h, s), "float32")
    return cutecall.cutlass_call(forward_kernel(c), output_shape_dtype=outputs,
                                 batch_modes=0, name=f"fa4_fwd_{_tag(c)}")


@functools.lru_cache(maxsize=None)
def preprocess(c: Config):
    """``(o, do, lse) -> (dpsum, lse_log2, dq_accum)``: the statistics
    (B, H, Sq rounded to tile_m) and the zeroed dQ accumulator."""
    import cutecall

    def outputs(o, do, lse, *_):
        b, s, h, _ = o.shape
        stat, acc = c.accum_shapes(b, s, h)
        return _sds(stat, "float32"), _sds(stat, "float32"), _sds(acc, "float32")
    call = cutecall.cutlass_call(
        preprocess_kernel(c), output_shape_dtype=outputs, batch_modes=0,
        output_params=("mPdPsum", "mLSElog2", "mdQaccum"),
        name=f"fa4_bwd_preprocess_{_tag(c)}")
    return lambda o, do, lse: call(o, do, lse, None, None, None, None, None, 1.0)


@functools.lru_cache(maxsize=None)
def backward(c: Config):
    """``(q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, scale)
    -> (dq_accum, dk, dv)``. MHA writes dK and dV (pass ``None`` for the
    accumulators); GQA accumulates them into float32 (B, Hkv, Sk rounded to
    tile_n times D) buffers the caller zeroes, converted by the postprocess."""
    import cutecall
    gqa = c.qhead_per_kvhead > 1

    def outputs(q, k, v, do, lse_log2, dpsum, dq_accum, *rest):
        if gqa:  # rest: dk_acc, dv_acc, scale
            return (_sds(dq_accum.shape, "float32"), _sds(rest[0].shape, "float32"),
                    _sds(rest[1].shape, "float32"))
        return (_sds(dq_accum.shape, "float32"), _sds(k.shape, k.dtype),
                _sds(v.shape, v.dtype))
    aliases = {6: 0, 7: 1, 8: 2} if gqa else {6: 0}
    call = cutecall.cutlass_call(
        backward_kernel(c), output_shape_dtype=outputs, batch_modes=0,
        input_output_aliases=aliases, name=f"fa4_bwd_{_tag(c)}")
    if gqa:
        return call
    return lambda q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, scale: \
        call(q, k, v, do, lse_log2, dpsum, dq_accum, scale)


def postprocess(c: Config, which: str):
    """``(accum, like, scale) -> out``: out has ``like``'s shape and dtype."""
    return lambda accum, like, scale: _postprocess(
        c, which, tuple(like.shape), str(like.dtype))(accum, scale, None, None, None)


@functools.lru_cache(maxsize=None)
def _postprocess(c: Config, which: str, shape: tuple, dtype: str):
    # One call object per output shape (the launcher's arguments do not say
    # it); they share one compiled kernel, whose extents are dynamic.
    import cutecall
    return cutecall.cutlass_call(
        postprocess_kernel(c, which), output_shape_dtype=_sds(shape, dtype),
        output_params=("mdQ",), batch_modes=0,
        name=f"fa4_bwd_postprocess_{which}_{_tag(c)}")


def dkv_accum_shape(c: Config, batch: int, seqlen_k: int, heads_kv: int) -> tuple:
    """GQA's dK/dV accumulators: (B, Hkv, Sk rounded to tile_n * D rounded)."""
    return (batch, heads_kv, _rounded(seqlen_k, c.bwd.n_block_size) * c.hdim_rounded)


def _tag(c: Config) -> str:
    return (f"{c.dtype}_d{c.hdim}_g{c.qhead_per_kvhead}"
            f"{'_causal' if c.causal else ''}")
