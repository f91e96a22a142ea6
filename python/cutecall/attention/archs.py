"""Which family of FlashAttention-4's kernels runs on a target arch, and
the per-family facts FA4's interface (``flash_attn.cute.interface``) fixes
for it: head dims, forward tiles, the backward's tiles.

=========  ============================  ===================================
family     arches                        FA4's classes
=========  ============================  ===================================
``sm80``   sm_80, sm_86, sm_89           ``FlashAttentionForwardSm80``; no
                                         backward (FA4's interface has none)
``sm90``   sm_90a                        ``FlashAttentionForwardSm90``,
                                         ``FlashAttentionBackwardSm90``
``sm100``  sm_100a, sm_103a (sm_110a)    ``FlashAttentionForwardSm100``,
                                         ``FlashAttentionBackwardSm100``,
                                         hd256: ``BlackwellFusedMulti-
                                         HeadAttentionBackward``
``sm120``  sm_120a, sm_121a              ``FlashAttentionForwardSm120``,
                                         ``FlashAttentionBackwardSm120``
=========  ============================  ===================================

Pure Python: nothing of FA4 is imported.
"""

from __future__ import annotations

import re

NAME = "cutecall.attention.attention"

# FA4's interface: compute capability major -> kernel family.
FAMILIES = {8: "sm80", 9: "sm90", 10: "sm100", 11: "sm100", 12: "sm120"}

# (head_dim, head_dim_v) cutecall.attention takes (FA4's tuned pairs) ...
HEAD_DIMS = ((64, 64), (96, 96), (128, 128), (192, 192), (256, 256), (192, 128))
# ... and those FA4's _validate_head_dims admits on sm100/sm110: up to 128,
# DeepSeek's (192, 128) and hd256. sm80/sm120 are limited by shared memory
# (the classes' can_implement, checked per call).
_SM100_HEAD_DIMS = ((64, 64), (96, 96), (128, 128), (192, 128), (256, 256))


def capability(arch: str) -> tuple:
    """(10, 0) for "sm_100a" (also "sm_100", "sm_100f"); a ValueError naming
    `arch` if it is not an arch name."""
    m = re.fullmatch(r"sm_(\d+)(\d)[af]?", str(arch))
    if not m:
        raise ValueError(f"{NAME}: target arch {arch!r} is not an arch name like 'sm_90a'")
    return int(m.group(1)), int(m.group(2))


def family(arch: str) -> str:
    """"sm80", "sm90", "sm100" or "sm120": whose kernels FA4 runs on `arch`;
    a ValueError naming the arch where FA4 has none."""
    major, minor = capability(arch)
    found = FAMILIES.get(major)
    if found is None:
        raise ValueError(
            f"{NAME}: target arch {arch!r} (compute capability {major}.{minor}): "
            "FlashAttention-4 has no kernels for it (it runs sm_80/86/89, sm_90a, "
            "sm_100a/103a and sm_120a/121a); set $CUTECALL_ARCH or compile "
            "for one of those")
    return found


def fa4_arch(arch: str) -> int:
    """The arch as FA4's interface counts it: 100 for sm_100a, 121 for sm_121a."""
    major, minor = capability(arch)
    return major * 10 + minor


def head_dims(fam: str) -> tuple:
    """The (head_dim, head_dim_v) pairs `fam` runs."""
    return _SM100_HEAD_DIMS if fam == "sm100" else HEAD_DIMS


def fwd_tile(fam: str, head_dim: int) -> tuple:
    """(tile_m, tile_n) of the forward off sm90, as ``_get_fwd_config``:
    sm120 128x128 up to D 64 (99 KB of shared memory), else 128x64; sm80
    128x64; sm100 128x128 (split-KV with D != Dv may take 128x64)."""
    if fam == "sm120":
        return (128, 128) if head_dim <= 64 else (128, 64)
    if fam == "sm80":
        return (128, 64)
    return (128, 128)


def bwd_config(fam: str, head_dim: int, tile_n: int = 128):
    """FA4's ``BwdConfig`` fields of the backward off sm90, as
    ``_flash_attn_bwd`` sets its arguments: sm120 64x64 with 4-warp atoms (1
    stage of Q and dO above D 64); sm100 128 x `tile_n` (its class ignores
    the sm80-style fields, left at ``_flash_attn_bwd``'s defaults)."""
    import types
    common = dict(num_stages_PdS=1, SdP_swapAB=False, dKV_swapAB=False, dQ_swapAB=False,
                  num_wg=1)
    if fam == "sm120":
        stages = 2 if head_dim <= 64 else 1
        return types.SimpleNamespace(m_block_size=64, n_block_size=64, num_stages_Q=stages,
                                     num_stages_dO=stages, AtomLayoutMSdP=4,
                                     AtomLayoutNdKV=4, AtomLayoutMdQ=4, **common)
    return types.SimpleNamespace(m_block_size=128, n_block_size=tile_n, num_stages_Q=2,
                                 num_stages_dO=2, AtomLayoutMSdP=2, AtomLayoutNdKV=1,
                                 AtomLayoutMdQ=1, **common)
