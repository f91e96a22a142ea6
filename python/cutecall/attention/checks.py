"""The argument checks of :func:`cutecall.attention.attention`:
every error names the argument and the value, and is raised before any
kernel is traced or compiled. :func:`check` returns the :class:`Config` the
arguments select on the target (:mod:`~cutecall.attention.selection`) and
the values the kernels receive; what FA4 lacks on the target's arch is in
:mod:`~cutecall.attention.limits`.

Pure shape/dtype logic on JAX arrays or ShapeDtypeStructs; FA4 is imported
only for its window resolution and tile configs (paged KV: whether pages
load by TMA).
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Optional

from . import block_sparsity as bsp, facts, limits, selection
from .archs import NAME, family, head_dims
from .config import DTYPES, SINK_DTYPES, Config
from .limits import fail


@dataclasses.dataclass(frozen=True)
class Checked:
    """What the kernels receive: the config, window sizes (ints or None,
    after FA4's causal/local resolution), the aux scalars as DSL values,
    and q's leading batch dims (dense layout; None for packed/paged)."""

    config: Config
    window: tuple
    aux_scalars: Optional[tuple]
    lead: tuple
    max_seqlen: tuple = (None, None)  # the hints as given (sm100 reads them)


def _shape(x, arg):
    shape = getattr(x, "shape", None)
    if shape is None or not hasattr(x, "dtype"):
        fail(f"{arg} must be an array, got {type(x).__name__}: {x!r}")
    return tuple(shape)


def _int_vector(x, arg, length, what):
    if x is None:
        return False
    shape = _shape(x, arg)
    if str(x.dtype) != "int32":
        fail(f"{arg} must be int32, got {x.dtype}")
    if shape != (length,):
        fail(f"{arg} must have shape ({what},) = ({length},), got {shape}")
    return True


def _window(causal, window_size, mask_mod):
    if not (isinstance(window_size, (tuple, list)) and len(window_size) == 2):
        fail(f"window_size must be a pair (left, right), got {window_size!r}")
    for side, w in zip(("left", "right"), window_size):
        if w is not None and (isinstance(w, bool) or not isinstance(w, numbers.Integral)
                              or w < 0):
            fail(f"window_size {side} must be None (unbounded) or an int >= 0, "
                 f"got {w!r}")
    left, right = (None if w is None else int(w) for w in window_size)
    if mask_mod is not None and (causal or left is not None or right is not None):
        fail(f"mask_mod with causal={causal!r}, window_size={tuple(window_size)!r}: "
             "FA4 ignores causal and windows when a mask_mod is given; express them "
             "in the mask_mod")
    if causal and right not in (None, 0):
        fail(f"causal=True with window_size right={right}: causal means a right "
             "window of 0 (pass window_size=(left, 0) or (left, None))")
    return facts.resolve_window(bool(causal), left, right, mask_mod is not None)


def _scalars(aux_scalars):
    if aux_scalars is None or len(aux_scalars) == 0:
        return None
    import cutlass
    out = []
    for i, s in enumerate(aux_scalars):
        if isinstance(s, bool) or not isinstance(s, (numbers.Number, cutlass.Numeric)):
            fail(f"aux_scalars[{i}] must be a number or a CuTe DSL scalar "
                 f"(cutlass.Float32(...)), got {type(s).__name__}: {s!r}")
        if isinstance(s, numbers.Integral):
            s = cutlass.Int32(int(s))
        elif isinstance(s, numbers.Real):
            s = cutlass.Float32(float(s))
        out.append(s)
    return tuple(out)


def _layout(qs, ks, vs, cu_seqlens_q, cu_seqlens_k, page_table):
    """The batch size B and q's leading dims (folded into B; dense only)."""
    cu_q, cu_k, paged = (x is not None for x in (cu_seqlens_q, cu_seqlens_k, page_table))
    if cu_q and len(qs) != 3:
        fail(f"with cu_seqlens_q, q must be packed (total_q, H, D), got shape {qs}")
    if not cu_q and (len(qs) < 3 or ((cu_k or paged) and len(qs) != 4)):
        fail(f"q must be {'(B, S, H, D)' if cu_k or paged else '(..., S, H, D)'}, "
             f"got shape {qs}")
    layout = ("(num_pages, page_size, Hkv, D)", 4) if paged else \
        ("(total_k, Hkv, D)", 3) if cu_k else ("(B, S, Hkv, D)", 4) if cu_q else \
        ("(..., S, Hkv, D)", len(qs))
    for arg, s in (("k", ks), ("v", vs)):
        if len(s) != layout[1] or len(s) < 3:
            fail(f"{arg} must be {layout[0]}, got shape {s}")
    if ks[:-1] != vs[:-1]:
        fail(f"k and v must agree in all but the head dim, got {ks} and {vs}")
    if paged and cu_k:
        fail("page_table with cu_seqlens_k: FA4's paged KV takes seqused_k for "
             "the lengths, not cu_seqlens_k")
    for arg, x in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if x is not None and (len(_shape(x, arg)) != 1 or _shape(x, arg)[0] < 2):
            fail(f"{arg} must be (B + 1,) with B >= 1, got shape {_shape(x, arg)}")
    if cu_q:
        batch = _shape(cu_seqlens_q, "cu_seqlens_q")[0] - 1
    elif cu_k:
        batch = _shape(cu_seqlens_k, "cu_seqlens_k")[0] - 1
    elif paged:
        batch = qs[0]
    else:
        if ks[:-3] != qs[:-3]:
            fail(f"q and k must have the same batch dims, got {qs[:-3]} and {ks[:-3]}")
        batch = 1
        for n in qs[:-3]:
            batch *= n
        return batch, qs[:-3]
    if not cu_q and qs[0] != batch:
        fail(f"q's batch ({qs[0]}) must be the B of cu_seqlens_k/page_table ({batch})")
    if not cu_k and not paged and ks[0] != batch:
        fail(f"k's batch ({ks[0]}) must be cu_seqlens_q's B ({batch})")
    return batch, None


def check(q, k, v, *, causal, window_size, softcap, score_mod, score_mod_bwd,
          mask_mod, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
          max_seqlen_q, max_seqlen_k, page_table, learnable_sink, aux_tensors,
          aux_scalars, scale, num_splits=1, target=None, block_sparse_tensors=None,
          block_sparse_tensors_bwd=None) -> Checked:
    """Validates every argument of ``attention`` (see its docstring) for
    `target` (a ``cutecall.Target``; default ``cutecall.current_target()``)."""
    if target is None:
        import cutecall
        target = cutecall.current_target()
    qs, ks, vs = _shape(q, "q"), _shape(k, "k"), _shape(v, "v")
    dtype = str(q.dtype)
    if dtype not in DTYPES or str(k.dtype) != dtype or str(v.dtype) != dtype:
        fail(f"q, k and v must all be bfloat16 or float16, got {q.dtype}, "
             f"{k.dtype}, {v.dtype}")
    batch, lead = _layout(qs, ks, vs, cu_seqlens_q, cu_seqlens_k, page_table)
    d, dv = qs[-1], vs[-1]
    fam = family(target.arch)
    if ks[-1] != d or (d, dv) not in head_dims(fam):
        fail(f"head dims (q {d}, k {ks[-1]}, v {dv}) must be one of FA4's {fam} "
             f"(head_dim, head_dim_v) pairs {head_dims(fam)} (target arch {target.arch})")
    h, hkv = qs[-2], ks[-2]
    if hkv < 1 or h % hkv:
        fail(f"q's heads ({h}) must be a multiple of k's ({hkv})")
    _lengths(batch, lead, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
             max_seqlen_q, max_seqlen_k, page_table)
    if isinstance(num_splits, bool) or not isinstance(num_splits, numbers.Integral) \
            or not 0 <= num_splits <= 256:
        fail(f"num_splits must be an int in [0, 256] (1: no split, 0: FA4's heuristic), "
             f"got {num_splits!r}")
    softcap = _mods(softcap, score_mod, score_mod_bwd, mask_mod, aux_tensors, aux_scalars)
    if learnable_sink is not None:
        ss = _shape(learnable_sink, "learnable_sink")
        if ss != (h,) or str(learnable_sink.dtype) not in SINK_DTYPES:
            fail(f"learnable_sink must be ({h},) (one per query head) of "
                 f"{SINK_DTYPES}, got {learnable_sink.dtype} {ss}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)):
        fail(f"scale must be a Python float (a runtime value), got {scale!r}")
    causal, local, left, right = _window(causal, window_size, mask_mod)
    sparse, sparse_heads = bsp.pattern(block_sparse_tensors, "block_sparse_tensors")
    sparse_bwd, _ = bsp.pattern(block_sparse_tensors_bwd, "block_sparse_tensors_bwd")
    config = Config(
        dtype, d, h // hkv, causal, hdim_v=dv if dv != d else 0, local=local,
        window_left=left is not None, window_right=right is not None,
        softcap=float(softcap), score_mod=score_mod, score_mod_bwd=score_mod_bwd,
        mask_mod=mask_mod, aux_tensors=-1 if aux_tensors is None else len(aux_tensors),
        cu_seqlens_q=cu_seqlens_q is not None, cu_seqlens_k=cu_seqlens_k is not None,
        seqused_q=seqused_q is not None, seqused_k=seqused_k is not None,
        paged_kv=page_table is not None,
        sink_dtype=str(learnable_sink.dtype) if learnable_sink is not None else "",
        sparse_block=sparse, sparse_bwd_block=sparse_bwd)
    paged = page_table is not None
    x = selection.Extents(
        batch=batch, seqlen_q=None if cu_seqlens_q is not None else qs[-3],
        total_q=qs[0] if cu_seqlens_q is not None else batch * qs[-3], heads=h,
        heads_kv=hkv, seqlen_k=ks[0] * ks[1] if paged else vs[-3],
        page_size=ks[1] if paged else None,
        pages_per_seq=_shape(page_table, "page_table")[1] if paged else 0,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, window=(left, right),
        num_splits=int(num_splits), sparse_heads=sparse_heads)
    config = selection.select(config, target, x)
    if paged:  # FA4: pages load by TMA when a page is a tile
        config = dataclasses.replace(config, paged_kv_tma=ks[1] == config.fwd.n_block_size)
    limits.check_forward(config, int(num_splits))
    if sparse or sparse_bwd:  # dense layouts only (limits): q (..., Sq, H, D)
        _sparse_shapes(config, block_sparse_tensors, block_sparse_tensors_bwd, batch, h,
                       qs[-3], ks[-3])
    return Checked(config, (left, right), _scalars(aux_scalars), lead,
                   (max_seqlen_q, max_seqlen_k))


def _sparse_shapes(c: Config, fwd, bwd, batch: int, heads: int, sq: int, sk: int) -> None:
    """The block-sparse tensors' shapes and block sizes against FA4's tiles
    (the backward's where FA4 has a block-sparse backward for `c`; where it
    has none, differentiating says so: ``limits.backward_unsupported``)."""
    if fwd is not None:
        bsp.check_forward(c, fwd, batch, heads, sq, sk)
    if bwd is not None and c.family in ("sm90", "sm100") and not c.bwd_hd256:
        bsp.check_backward(c, bwd, batch, heads, sq, sk)


def _lengths(batch, lead, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
             max_seqlen_q, max_seqlen_k, page_table) -> None:
    for arg, x in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _int_vector(x, arg, batch + 1, "B + 1")
    for arg, x in (("seqused_q", seqused_q), ("seqused_k", seqused_k)):
        if x is not None and lead is not None and _shape(x, arg) == lead:
            if str(x.dtype) != "int32":
                fail(f"{arg} must be int32, got {x.dtype}")
            continue  # dense layout: one length per batch element, folded
        _int_vector(x, arg, batch, "B")
    for arg, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if m is not None and (isinstance(m, bool) or not isinstance(m, numbers.Integral)
                              or m < 0):
            fail(f"{arg} must be None or a Python int >= 0, got {m!r}")
    if page_table is not None:
        ps = _shape(page_table, "page_table")
        if str(page_table.dtype) != "int32" or len(ps) != 2 or ps[0] != batch:
            fail(f"page_table must be int32 (B, max_pages) with B = {batch}, got "
                 f"{page_table.dtype} {ps}")


def _mods(softcap, score_mod, score_mod_bwd, mask_mod, aux_tensors, aux_scalars) -> float:
    """Checks softcap, the mods and what they read; returns softcap (0: none)."""
    softcap = 0.0 if softcap is None else softcap
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real) or softcap < 0:
        fail(f"softcap must be a float >= 0 (0: none), got {softcap!r}")
    if softcap and score_mod is not None:
        fail(f"softcap={softcap!r} with a score_mod: FA4 implements softcap as a "
             "score_mod; fold it into yours")
    for arg, f in (("score_mod", score_mod), ("score_mod_bwd", score_mod_bwd),
                   ("mask_mod", mask_mod)):
        if f is not None and not callable(f):
            fail(f"{arg} must be a CuTe DSL callable (@cute.jit), got {f!r}")
    if score_mod_bwd is not None and score_mod is None:
        fail(f"score_mod_bwd={score_mod_bwd!r} without a score_mod")
    if aux_tensors is not None:
        if not isinstance(aux_tensors, (list, tuple)):
            fail(f"aux_tensors must be a list of arrays, got "
                 f"{type(aux_tensors).__name__}: {aux_tensors!r}")
        for i, t in enumerate(aux_tensors):
            _shape(t, f"aux_tensors[{i}]")
    if (aux_tensors or aux_scalars) and score_mod is None and mask_mod is None:
        fail("aux_tensors/aux_scalars given without a score_mod or mask_mod to read them")
    return float(softcap)
