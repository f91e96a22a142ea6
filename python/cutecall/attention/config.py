"""What FlashAttention-4's Hopper (sm90) kernel objects are built from: one
:class:`Config` per compile, and the buffer shapes FA4's interface
allocates around the kernels.

A Config holds only what changes FA4's kernel objects or the structure of
their arguments (dtype, head dims, GQA ratio, causal/local, which optional
tensors are present, the score/mask callables, softcap); never extents, so
one compile serves every batch, sequence length, head count and window
size. Tile shapes come from FA4's own ``_tile_size_fwd_sm90`` /
``_tile_size_bwd_sm90``; softcap becomes FA4's own
``create_softcap_scoremod`` pair, as ``_flash_attn_fwd`` / ``_flash_attn_bwd``
build it.

FA4 is imported when a property or function runs, never at import.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

ARCH = "sm_90a"
DTYPES = ("bfloat16", "float16")
# (head_dim, head_dim_v) FA4 tunes sm90 tiles for, forward and backward.
HEAD_DIMS = ((64, 64), (96, 96), (128, 128), (192, 192), (256, 256), (192, 128))
SINK_DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class Config:
    """One set of FA4 kernel objects (the first four fields are the
    original MHA/GQA config; the rest default to "absent")."""

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

    @property
    def dv(self) -> int:
        return self.hdim_v or self.hdim

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
        from flash_attn.cute import interface
        return interface._tile_size_fwd_sm90(self.hdim, self.dv, self.causal, self.local)

    @property
    def bwd(self):
        from flash_attn.cute import interface
        return interface._tile_size_bwd_sm90(self.hdim, self.dv, self.causal, self.local)

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
        return 64 if self.bwd.dKV_swapAB else 32  # _flash_attn_bwd, arch 9x

    @property
    def hdim_rounded(self) -> int:
        return _rounded(self.hdim, self.hdim_multiple_of)

    @property
    def hdim_v_rounded(self) -> int:
        return _rounded(self.dv, self.hdim_multiple_of)

    @property
    def dq_post_threads(self) -> int:
        """The dQ postprocess's threads (``num_threads_post_dQ``)."""
        cfg = self.bwd
        return 128 if cfg.dQ_single_wg else cfg.num_wg * 128

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
        Hkv, Skr * Dr) each, or (Hkv, Tkp * Dr) with cu_seqlens_k."""
        tile = self.bwd.n_block_size
        if self.cu_seqlens_k:
            rows = (seqlen_k + (batch + 1) * tile - 1) // tile * tile
            return (heads_kv, rows * self.hdim_rounded), (heads_kv, rows * self.hdim_v_rounded)
        rows = _rounded(seqlen_k, tile)
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
                 ("varlen", self.varlen), ("paged", self.paged_kv), ("sink", self.sink_dtype))
        return "_".join(parts + [n for n, on in flags if on])


def _rounded(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def backward_unsupported(c: Config) -> Optional[str]:
    """Why FA4's sm90 backward cannot differentiate `c` (naming the
    option), or None."""
    if c.paged_kv:
        return ("page_table: FA4's backward has no paged KV (its torch "
                "flash_attn_varlen_func is forward-only with page_table)")
    if c.score_mod is not None and c.score_mod_bwd is None:
        return ("score_mod without score_mod_bwd: FA4's backward needs the "
                "score_mod's derivative (score_mod_bwd=...)")
    if c.qhead_per_kvhead > 1 and c.dv != c.hdim:
        return (f"head dims ({c.hdim}, {c.dv}) with GQA/MQA (qhead_per_kvhead="
                f"{c.qhead_per_kvhead}): FA4's sm90 backward requires head_dim "
                "== head_dim_v for GQA")
    return None


def aux_data(aux_tensors, aux_scalars) -> Any:
    """FA4's ``AuxData(tensors, scalars)`` NamedTuple, as its interface
    passes it to every kernel (``AuxData(None, None)`` when absent)."""
    from flash_attn.cute.utils import AuxData
    return AuxData(list(aux_tensors) if aux_tensors is not None else None,
                   tuple(aux_scalars) if aux_scalars else None)
