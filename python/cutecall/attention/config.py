"""What FlashAttention-4's kernel objects are built from: one
:class:`Config` per compile, and the buffer shapes FA4's interface
allocates around the kernels.

A Config holds only what changes FA4's kernel objects or the structure of
their arguments (the target arch, dtype, head dims, GQA ratio,
causal/local, which optional tensors are present, the score/mask
callables, softcap, and on sm100 the choices FA4's interface makes per call:
:mod:`~cutecall.attention.selection`); never extents, so one compile serves
every batch, sequence length, head count and window size of a config. On
sm90 tile shapes come from FA4's own ``_tile_size_fwd_sm90`` /
``_tile_size_bwd_sm90``, elsewhere from :mod:`~cutecall.attention.archs`;
softcap becomes FA4's own ``create_softcap_scoremod`` pair, as
``_flash_attn_fwd`` / ``_flash_attn_bwd`` build it.

A plain frozen dataclass of hashable values. FA4 is imported when a
property or function runs, never at import.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Callable, Optional

from . import facts
from .archs import HEAD_DIMS, bwd_config, fa4_arch, family  # noqa: F401

ARCH = "sm_90a"  # FA4's Hopper classes: a Config's default target
DTYPES = ("bfloat16", "float16")
SINK_DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class Config:
    """One set of FA4 kernel objects (the first four fields are the
    original MHA/GQA config; the rest default to "absent", on sm90)."""

    dtype: str                 # "bfloat16" or "float16"
    hdim: int                  # q and k head dim
    qhead_per_kvhead: int      # 1: MHA; > 1: GQA/MQA
    causal: bool               # FA4's is_causal, after its window resolution
    hdim_v: int = 0            # v's head dim; 0: same as hdim
    local: bool = False        # a sliding window (FA4's is_local)
    window_left: bool = False  # window_size_left is passed (not None)
    window_right: bool = False
    softcap: float = 0.0
    score_mod: Optional[Callable] = None
    score_mod_bwd: Optional[Callable] = None
    mask_mod: Optional[Callable] = None
    aux_tensors: int = -1      # how many aux tensors; -1: FA4's None
    cu_seqlens_q: bool = False
    cu_seqlens_k: bool = False
    seqused_q: bool = False
    seqused_k: bool = False
    paged_kv: bool = False
    paged_kv_tma: bool = False  # page_size == the forward's tile_n
    sink_dtype: str = ""       # learnable_sink's dtype; "": none
    # The target, and what FA4's interface picks for it (selection.py).
    arch: str = ARCH           # the target arch: which kernel family runs
    sms: int = 0               # the target's SM count (sm100's heuristics read it)
    tile: tuple = ()           # forward (tile_m, tile_n) off sm90
    pack_gqa: Optional[bool] = None  # None: FA4's default, qhead_per_kvhead > 1
    q_stage: int = 1           # sm100: Q tiles per CTA (2: prefill bucket)
    two_cta: bool = False      # sm100 forward: 2-CTA MMA, cluster (2, 1)
    persistent: bool = False   # sm100 forward: static persistent scheduler
    clc: bool = False          # sm100 forward: CLC scheduler
    s_ping_pong: bool = False  # sm100 forward: S ping-pong (q_stage 1)
    num_splits: int = 1        # sm100 forward: > 1 splits KV (+ FA4's combine)
    bwd_tile_n: int = 128      # sm100 backward: KV tile rows per CTA
    bwd_cluster: int = 1       # sm100 backward: cluster size (2 with 2-CTA)
    bwd_2cta: bool = False     # sm100 backward: 2-CTA MMA
    bwd_hd256: bool = False    # sm100 backward: FA4's dedicated hd256 kernel
    # FA4's block sparsity (block_sparsity.py): (q, kv) block sizes; (): off.
    sparse_block: tuple = ()   # the forward's block_sparse_tensors
    sparse_bwd_block: tuple = ()  # the backward's (q-direction) tensors

    @property
    def dv(self) -> int:
        return self.hdim_v or self.hdim

    @property
    def family(self) -> str:
        """"sm80", "sm90", "sm100" or "sm120" (:mod:`~cutecall.attention.archs`)."""
        return family(self.arch)

    @property
    def fa4_arch(self) -> int:
        return fa4_arch(self.arch)

    @property
    def packs_gqa(self) -> bool:
        """FA4's forward pack_gqa: query heads of a KV head in one tile."""
        return self.qhead_per_kvhead > 1 if self.pack_gqa is None else self.pack_gqa

    @property
    def varlen_q(self) -> bool:
        return self.cu_seqlens_q or self.seqused_q

    @property
    def varlen(self) -> bool:
        return self.varlen_q or self.cu_seqlens_k or self.seqused_k

    @property
    def has_aux(self) -> bool:
        return self.aux_tensors >= 0

    @property
    def fwd(self):
        """FA4's ``FwdConfig`` of the forward (tiles; q_stage and splits), as
        a namespace of its fields (on sm90 FA4's answer, remembered by
        :mod:`~cutecall.attention.facts`)."""
        if self.family == "sm90":
            return facts.sm90_tiles("fwd", self.hdim, self.dv, self.causal, self.local,
                                    self.sparse_block)
        tile_m, tile_n = self.tile
        return types.SimpleNamespace(m_block_size=tile_m, n_block_size=tile_n,
                                     mma_pv_is_rs=True, intra_wg_overlap=True,
                                     q_stage=self.q_stage, num_splits=self.num_splits)

    @property
    def bwd(self):
        """FA4's ``BwdConfig`` of the backward, as a namespace of its fields."""
        if self.family == "sm90":
            return facts.sm90_tiles("bwd", self.hdim, self.dv, self.causal, self.local,
                                    self.sparse_bwd_block[:1])
        return bwd_config(self.family, self.hdim, self.bwd_tile_n)

    @property
    def subtile_factors(self) -> tuple:
        """The forward's (q_subtile_factor, kv_subtile_factor): tiles per
        sparse block (FA4's ``normalize_block_sparse_config``); (1, 1) dense."""
        if not self.sparse_block:
            return 1, 1
        cfg = self.fwd
        q_tile = cfg.m_block_size * (self.q_stage if self.family == "sm100" else 1)
        return self.sparse_block[0] // q_tile, self.sparse_block[1] // cfg.n_block_size

    @property
    def bwd_subtile_factors(self) -> tuple:
        """The backward's (q_subtile_factor, kv_subtile_factor), as
        ``_flash_attn_bwd``: (2, 1) without its block-sparse tensors."""
        if not self.sparse_bwd_block:
            return 2, 1
        cfg = self.bwd
        kv = self.sparse_bwd_block[1] // cfg.n_block_size if self.family == "sm100" else 1
        return self.sparse_bwd_block[0] // cfg.m_block_size, kv

    def fwd_score_mod(self):
        """The forward's score_mod: softcap as FA4 builds it, else the user's."""
        if self.softcap:
            from flash_attn.cute import utils
            return utils.create_softcap_scoremod(self.softcap)
        return self.score_mod

    def bwd_score_mods(self) -> tuple:
        """(score_mod, score_mod_bwd) of the backward, as ``_flash_attn_bwd``."""
        if self.softcap:
            from flash_attn.cute import utils
            return (utils.create_softcap_scoremod(self.softcap),
                    utils.create_softcap_scoremod_bwd(self.softcap))
        return self.score_mod, self.score_mod_bwd

    @property
    def hdim_multiple_of(self) -> int:
        """``_flash_attn_bwd``: 64 on arch 9x with dKV_swapAB, else 32."""
        return 64 if self.family == "sm90" and self.bwd.dKV_swapAB else 32

    @property
    def hdim_rounded(self) -> int:
        return _rounded(self.hdim, self.hdim_multiple_of)

    @property
    def hdim_v_rounded(self) -> int:
        return _rounded(self.dv, self.hdim_multiple_of)

    @property
    def dq_post_threads(self) -> int:
        """The dQ postprocess's threads (``num_threads_post_dQ``)."""
        if self.family != "sm90":
            return 128
        cfg = self.bwd
        return 128 if cfg.dQ_single_wg else cfg.num_wg * 128

    @property
    def dkv_post_threads(self) -> int:
        """The dK/dV postprocess's threads (``num_threads_post_dKV``)."""
        return self.bwd.num_wg * 128 if self.family == "sm90" else 128

    def accum_shapes(self, batch: int, seqlen: int, heads: int) -> tuple:
        """The backward's statistics (dPsum, LSE_log2) and dQ accumulator
        shapes, as ``_flash_attn_bwd`` allocates them: ((B, H, Sr), (B, H,
        Sr * Dr)); with cu_seqlens_q, `seqlen` is total_q and they are
        ((H, Tp), (H, Tp * Dr)), Tp = total_q padded by a tile per sequence
        (`batch` sequences)."""
        tile = self.bwd.m_block_size
        if self.cu_seqlens_q:
            rows = (seqlen + (batch + 1) * tile - 1) // tile * tile
            return (heads, rows), (heads, rows * self.hdim_rounded)
        rows = _rounded(seqlen, tile)
        return (batch, heads, rows), (batch, heads, rows * self.hdim_rounded)

    def dkv_accum_shapes(self, batch: int, seqlen_k: int, heads_kv: int) -> tuple:
        """GQA's float32 dK and dV accumulators, zeroed by the caller: (B,
        Hkv, Skr * Dr) each, or (Hkv, Tkp * Dr) with cu_seqlens_k; with a
        cluster of 2 (sm100's 2-CTA backward) Skr is an even number of tiles
        and Tkp pads by cluster tiles."""
        tile = self.bwd.n_block_size
        if self.cu_seqlens_k:
            tile *= self.bwd_cluster
            rows = (seqlen_k + (batch + 1) * tile - 1) // tile * tile
            return (heads_kv, rows * self.hdim_rounded), (heads_kv, rows * self.hdim_v_rounded)
        rows = _rounded(seqlen_k, tile)
        if self.bwd_cluster == 2 and (rows // tile) % 2:
            rows += tile
        return ((batch, heads_kv, rows * self.hdim_rounded),
                (batch, heads_kv, rows * self.hdim_v_rounded))

    def cutlass_dtype(self, name: str | None = None):
        from cutecall import jax_to_cutlass_dtype
        return jax_to_cutlass_dtype(name or self.dtype)

    def tag(self) -> str:
        """A readable kernel-name suffix (not a key: the Config is)."""
        parts = [self.dtype, f"d{self.hdim}" + (f"v{self.dv}" if self.dv != self.hdim else ""),
                 f"g{self.qhead_per_kvhead}"]
        flags = (("causal", self.causal), ("local", self.local), ("softcap", self.softcap),
                 ("score", self.score_mod is not None), ("mask", self.mask_mod is not None),
                 ("varlen", self.varlen), ("paged", self.paged_kv), ("sink", self.sink_dtype),
                 ("sparse", bool(self.sparse_block or self.sparse_bwd_block)))
        if self.family != "sm90":
            flags += ((self.arch, True), (f"q{self.q_stage}", self.family == "sm100"),
                      ("2cta", self.two_cta), (f"split{self.num_splits}", self.num_splits > 1))
        return "_".join(parts + [n for n, on in flags if on])


def _rounded(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def aux_data(aux_tensors, aux_scalars) -> Any:
    """FA4's ``AuxData(tensors, scalars)``, as its interface passes it to
    every kernel (``(None, None)`` when absent), as the plain tuple the
    launchers' ``aux_data: AuxData`` annotation turns into FA4's NamedTuple
    (so building the call needs no FA4 import)."""
    return (list(aux_tensors) if aux_tensors is not None else None,
            tuple(aux_scalars) if aux_scalars else None)
