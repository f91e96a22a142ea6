"""Forward mode for FlashAttention-4 in JAX: ``jax.jvp``, ``jax.linearize``
and ``jax.jacfwd`` of FA4's differentiable attention, keeping FA4's
backward kernels for ``jax.grad`` (on every arch). Wiring, in
``cutecall.attention._differentiable`` (``forward``: its FA4 forward)::

    d = cutecall.differentiable(primal).defvjp(fwd, bwd)
    return fj.with_jvp(d, c, scale, window_size=window, forward=forward,
                       return_lse=return_lse)

then ``jax.jvp(lambda q, k, v: attention(q, k, v, causal=True), (q, k, v),
(q_dot, k_dot, v_dot))`` runs FA4's forward kernel and the XLA term below,
and ``jax.grad`` still runs FA4's backward kernels.

The derivative. With S = scale q k^T (query head h reads key/value head
h // G under GQA), logits Z = score(S) (identity, or FA4's softcap
``softcap * tanh(S / softcap)``) under a mask M (causal, sliding window,
varlen segments), P = softmax(Z) per query row, o = P v and
lse_i = log sum_j exp(Z_ij)::

    o' = P v'  +  P' v,     P'_ij = P_ij (Z'_ij - c_i),   c_i = sum_j P_ij Z'_ij
    Z' = score'(S) * S',    S' = scale (q' k^T + q k'^T)

    o'_i = attention(q, k, v')_i  +  sum_j P_ij Z'_ij v_j  -  c_i o_i
    lse'_i = c_i     (+ P_sink,i sink'_h with a learnable sink: then o'_i
                      also gets - P_sink,i sink'_h o_i, P_sink,i = exp(sink_h - lse_i))

* ``attention(q, k, v')`` is FA4's forward kernel: same q and k, so the
  same P. o and lse come from FA4's forward on (q, k, v): the primal's
  launch again, same operands (XLA's CSE may merge the two).
* The score term runs in XLA over key blocks (``lax.scan``,
  :mod:`~cutecall.attention.score_tangent`, with the masks): per block it
  forms S and S' for all queries x ``block_k`` keys in float32, P exactly
  from the forward's lse (no running max, no rescaling), and accumulates
  ``sum_j P Z' v`` and ``c`` in float32. Memory: a few (B, H, Sq, block_k)
  float32 tiles, never Sq x Sk.

Why the score term is not one of FA4's kernels. FA4's backward computes
dQ_i = scale sum_j P_ij (dO_i . V_j - D_i) K_j, D_i = dO_i . O_i. Run on
q~ = [q, 0], k~ = [k, v] (zero columns leave P unchanged), V = [k, k'],
dO = [q', q] and O = attention(q~, k~, V), the second half of dQ~ is
``sum_j P_ij (S'_ij - c_i) v_j`` (up to FA4's scale). It is not used here:
it needs head dim 2D (so D <= 128), computes dK~ and dV~ for nothing, and
softcap's backward multiplies by 1 - tanh^2 after subtracting D_i where the
tangent needs it before. What XLA cannot express raises, naming the option
(:func:`jvp_rule`): CuTe DSL ``score_mod``/``mask_mod`` without a JAX
equivalent (``score=``, ``mask=``), paged KV, q and k in different layouts.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

from .reference import identity_score, reference_attention
from .score_tangent import ScoreFn, dense_mask, score_tangent, softcap_score, varlen_mask

__all__ = ["jvp_rule", "with_jvp", "score_tangent", "reference_attention",
           "dense_mask", "varlen_mask", "softcap_score", "identity_score"]

# The primal of cutecall.attention._differentiable: (q, k, v, learnable_sink,
# cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, aux_tensors,
# and FA4's blocksparse tuples of the forward and the backward).
_ARGS = ("q", "k", "v", "sink", "cu_q", "cu_k", "used_q", "used_k", "pages", "aux",
         "sparse", "sparse_bwd")


def jvp_rule(c, scale: float, *, window_size=(None, None),
             forward: Optional[Callable] = None, mask: Optional[Callable] = None,
             score: Optional[ScoreFn] = None, return_lse: bool = False,
             block_k: int = 128) -> Callable:
    """The forward-mode rule of FA4 attention, in ``defjvp``'s contract.

    Args:
      c: the attention's ``Config``: ``causal``, ``softcap``, ``score_mod``,
        ``mask_mod`` are read from it (absent fields: off).
      scale: the softmax scale.
      window_size: (left, right), as given or as FA4 resolves it (None:
        unbounded; ``c.causal`` adds right = 0).
      forward: ``(*primals) -> (o, lse)`` in FA4's layouts, called on the
        primals and on them with v replaced by v'. Default: FA4's forward
        kernel for ``c`` (no aux tensors). A pure-JAX rule: a lambda around
        :func:`~cutecall.attention.reference.reference_attention`.
      mask: ``primals -> MaskFn``, the mask in JAX. Default: from causal,
        the window, seqused and (both) cu_seqlens.
      score: a :data:`ScoreFn`. Default: softcap's (``c.softcap``), else
        identity.
      return_lse: the primal returns (o, lse); the rule returns (o, lse) and
        (o', lse').
      block_k: keys per step of the XLA scan.

    Primals: (q, k, v) or cutecall.attention's (q, k, v, learnable_sink,
    cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table,
    aux_tensors); q, k, v and the sink get tangents.

    Returns ``rule(primals, tangents) -> (outputs, output_tangents)``. Forward
    mode of what XLA cannot express raises (when a jvp is taken; reverse
    mode is unaffected): a CuTe DSL ``score_mod`` or ``mask_mod`` with no
    JAX equivalent (``score=``, ``mask=``) raises
    :class:`cutecall.DifferentiationError` naming it, as do ``page_table``
    and a packed q with a dense k (or the reverse).
    """
    import jax.numpy as jnp
    from cutecall import DifferentiationError
    f32 = jnp.float32
    causal = bool(getattr(c, "causal", False))
    missing = [(name, given) for name, given, equivalent in (
        ("score_mod", getattr(c, "score_mod", None), score),
        ("mask_mod", getattr(c, "mask_mod", None), mask))
        if given is not None and equivalent is None]
    softcap = getattr(c, "softcap", 0.0)
    score = score or (softcap_score(softcap) if softcap else identity_score)
    forward = forward or functools.partial(_fa4_forward, c, scale, window_size)

    def fail(option, why):
        raise DifferentiationError(
            f"cutecall.attention: forward mode (jax.jvp, jax.linearize, "
            f"jax.jacfwd) with {option}: {why}; reverse mode (jax.grad, jax.vjp) "
            "runs FA4's backward")

    def rule(primals, tangents):
        if missing:
            name, given = missing[0]
            fail(f"{name}={given!r}", f"XLA cannot evaluate a CuTe DSL {name}; give its JAX "
                 f"equivalent as cutecall.attention.jvp.jvp_rule({name[:-4]}=...)")
        a = dict(zip(_ARGS, primals), **dict.fromkeys(_ARGS[len(primals):]))
        q, k, v, sink = a["q"], a["k"], a["v"], a["sink"]
        if a["pages"] is not None or a["sparse"] is not None:
            fail("page_table" if a["sparse"] is None else "block_sparse_tensors",
                 "the rule does not gather paged KV or skip sparse blocks")
        packed = q.ndim == 3
        if mask is None and packed != (k.ndim == 3):
            fail("cu_seqlens_q" if packed else "cu_seqlens_k",
                 "one of q and k packed and the other dense; pass mask=")
        q_dot, k_dot, v_dot = tangents[:3]
        o, lse = forward(*primals)
        pv_dot, _ = forward(q, k, v_dot, *primals[3:])
        if mask is not None:
            m = mask(primals)
        elif packed:
            m = varlen_mask(a["cu_q"], a["cu_k"], causal=causal, window_size=window_size,
                            seqused_q=a["used_q"], seqused_k=a["used_k"])
        else:
            m = dense_mask(q.shape[1], k.shape[1], causal=causal, window_size=window_size,
                           seqused_q=a["used_q"], seqused_k=a["used_k"])
        batch = (lambda x: x[None]) if packed else (lambda x: x)
        unbatch = (lambda x: x[0]) if packed else (lambda x: x)
        term, lse_dot = score_tangent(
            *(batch(x) for x in (q, k, v, o, lse, q_dot, k_dot)), scale=scale,
            mask=m, score=score, block_k=block_k)
        term, lse_dot = unbatch(term), unbatch(lse_dot)
        if sink is not None:  # lse' gains P_sink sink', o' loses P_sink sink' o
            heads = (-1, 1)                   # lse: (B, H, Sq) or (H, T)
            moved = jnp.exp(sink.astype(f32).reshape(heads) - lse) * \
                tangents[3].astype(f32).reshape(heads)
            lse_dot = lse_dot + moved
            term = term - jnp.moveaxis(moved, -2, -1)[..., None] * o.astype(f32)
        o_dot = (pv_dot.astype(f32) + term).astype(o.dtype)
        if return_lse:
            return (o, lse), (o_dot, lse_dot.astype(lse.dtype))
        return o, o_dot

    return rule


def _fa4_forward(c, scale, window_size, q, k, v, sink=None, cu_q=None, cu_k=None,
                 used_q=None, used_k=None, pages=None, aux=None):
    if aux is not None:
        raise TypeError("cutecall.attention.jvp.jvp_rule: with aux_tensors, pass "
                        "forward= (the attention's own forward)")
    from . import kernels as fk
    from .config import aux_data
    left, right = window_size
    return fk.forward(c)(q, k, v, scale, cu_q, cu_k, used_q, used_k, pages,
                         left, right, sink, aux_data(None, None))


def with_jvp(d, c, scale: float, **options):
    """``d`` (a ``cutecall.differentiable`` of FA4 attention, with FA4's
    backward as ``defvjp``) with forward mode added: a copy, ``d`` itself
    unchanged (it may be cached). ``options``: :func:`jvp_rule`'s."""
    import copy
    return copy.copy(d).defjvp(jvp_rule(c, scale, **options))
