"""A float32 reference for :func:`cutecall.attention.attention`
(every option, as FA4 defines it), and example ``score_mod`` / ``mask_mod``
callables in FA4's form with their reference semantics.

    o, lse = reference(q, k, v, causal=True, cu_seqlens_q=np.array([0, 5, 300]))

Masks follow FA4: query row i of a sequence (Sq queries, Sk keys) sees key
j when ``i + Sk - Sq - left <= j <= i + Sk - Sq + right`` (bottom-right
aligned; ``causal`` is right = 0; ``None`` is unbounded). A row that sees
no key has o = 0 and lse = -inf (or the sink). The learnable sink is one
extra softmax column of logit ``sink[h]`` (natural-log units, unscaled)
with no value. Packed and paged layouts are unpacked per sequence with
concrete (numpy) offsets, so it runs eagerly; it is differentiable in q, k,
v and the sink (``jax.vjp``), the reference for the kernels' gradients.
"""

from __future__ import annotations

import numpy as np

__all__ = ["reference", "reference_attention", "alibi_score_mod", "alibi_score_mod_bwd",
           "alibi_reference", "prefix_lm_mask_mod", "prefix_lm_reference",
           "grouped_heads", "identity_score"]


def identity_score(s, s_dot):
    """The score map of plain attention, in
    :mod:`~cutecall.attention.score_tangent`'s ``score(s, s_dot) -> (z, z_dot)``
    form."""
    return s, s_dot


def grouped_heads(x, hkv: int):
    """(B, S, H, D) -> (B, S, Hkv, G, D): query head h = hkv * G + g, as FA4
    groups GQA heads."""
    b, s, h, d = x.shape
    return x.reshape(b, s, hkv, h // hkv, d)


def reference(q, k, v, *, causal=False, window_size=(None, None), softcap=0.0,
              score_mod=None, mask_mod=None, cu_seqlens_q=None, cu_seqlens_k=None,
              seqused_q=None, seqused_k=None, page_table=None, learnable_sink=None,
              scale=None):
    """(o, lse) in float32: o like q with v's head dim, lse (B, H, Sq) or
    (H, total_q). `score_mod(s, b, h, q_idx, kv_idx)` and `mask_mod(b, h,
    q_idx, kv_idx)` are jnp functions on (H, Sq, Sk) broadcast indices (the
    ``*_reference`` of the example mods). Rows past seqused_q are 0 / -inf."""
    import jax.numpy as jnp
    f32 = jnp.float32
    q, k, v = (jnp.asarray(x).astype(f32) for x in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    sink = None if learnable_sink is None else jnp.asarray(learnable_sink).astype(f32)
    packed_q = cu_seqlens_q is not None
    batch = len(cu_seqlens_q) - 1 if packed_q else (
        len(cu_seqlens_k) - 1 if cu_seqlens_k is not None else q.shape[0])
    outs, lses = [], []
    for b in range(batch):
        if packed_q:
            q0, q1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
            qb = q[q0:q1]
        else:
            qb = q[b]
        kb, vb = _keys(k, v, b, cu_seqlens_k, page_table, seqused_k)
        used = qb.shape[0] if seqused_q is None else int(seqused_q[b])
        o, lse = _one(qb[:used], kb, vb, b, scale, causal, window_size, softcap,
                      score_mod, mask_mod, sink)
        pad = qb.shape[0] - used
        o = jnp.concatenate([o, jnp.zeros((pad,) + o.shape[1:], f32)])
        lse = jnp.concatenate([lse, jnp.full((lse.shape[0], pad), -jnp.inf, f32)], 1)
        outs.append(o)
        lses.append(lse)
    if packed_q:
        total = q.shape[0] - int(cu_seqlens_q[-1])  # rows past the last sequence
        o = jnp.concatenate(outs + [jnp.zeros((total,) + outs[0].shape[1:], f32)])
        lse = jnp.concatenate(lses + [jnp.full((lses[0].shape[0], total), -jnp.inf, f32)], 1)
        return o, lse
    return jnp.stack(outs), jnp.stack(lses)


def _keys(k, v, b, cu_seqlens_k, page_table, seqused_k):
    if page_table is not None:
        pages = np.asarray(page_table[b])
        kb, vb = (x[pages].reshape((-1,) + x.shape[2:]) for x in (k, v))
    elif cu_seqlens_k is not None:
        k0, k1 = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        kb, vb = k[k0:k1], v[k0:k1]
    else:
        kb, vb = k[b], v[b]
    if seqused_k is not None:
        kb, vb = kb[:int(seqused_k[b])], vb[:int(seqused_k[b])]
    return kb, vb


def _one(q, k, v, b, scale, causal, window_size, softcap, score_mod, mask_mod, sink):
    """One sequence: q (Sq, H, D), k/v (Sk, Hkv, D) -> o (Sq, H, Dv), lse (H, Sq)."""
    import jax
    import jax.numpy as jnp
    hi = jax.lax.Precision.HIGHEST
    sq, h, sk, hkv = q.shape[0], q.shape[1], k.shape[0], k.shape[1]
    k, v = (jnp.repeat(x, h // hkv, axis=1) for x in (k, v))
    s = jnp.einsum("qhd,khd->hqk", q, k, precision=hi) * scale
    if softcap:
        s = softcap * jnp.tanh(s / softcap)
    hh = jnp.arange(h)[:, None, None]
    qi = jnp.arange(sq)[None, :, None]
    kj = jnp.arange(sk)[None, None, :]
    if score_mod is not None:
        s = score_mod(s, b, hh, qi, kj)
    left, right = window_size
    right = 0 if causal else right
    keep = jnp.ones(s.shape, bool)
    if right is not None:
        keep &= kj <= qi + sk - sq + right
    if left is not None:
        keep &= kj >= qi + sk - sq - left
    if mask_mod is not None:
        keep &= mask_mod(b, hh, qi, kj)
    s = jnp.where(keep, s, -jnp.inf)
    cols = s if sink is None else jnp.concatenate(
        [s, jnp.broadcast_to(sink[:, None, None], (h, sq, 1))], -1)
    lse = jax.nn.logsumexp(cols, axis=-1)
    p = jnp.where(jnp.isfinite(lse)[..., None], jnp.exp(s - lse[..., None]), 0.0)
    return jnp.einsum("hqk,khd->qhd", p, v, precision=hi), lse


# ---------------------------------------------------------------------------
# Example mods in FA4's form (``@cute.jit``; FA4 calls them with keyword
# q_idx, kv_idx, seqlen_info, aux_tensors[, aux_scalars]).

def alibi_score_mod(bias_scale: float):
    """``score * aux_scalars[0] - bias_scale * slopes[h] * (q_idx - kv_idx)``,
    slopes = ``aux_tensors[0]`` (H,) float32. `bias_scale` is captured:
    compile-time (a new value, a new compile); the logit scale is a runtime
    aux scalar."""
    import cutlass
    import cutlass.cute as cute

    @cute.jit
    def alibi(score, b_idx, h_idx, q_idx, kv_idx, seqlen_info, aux_tensors, aux_scalars):
        slopes = aux_tensors[0]
        head = cute.make_rmem_tensor(1, cutlass.Int32)
        head.store(h_idx)
        slope = cute.make_rmem_tensor(1, slopes.element_type)
        slope[0] = slopes[head[0]]
        distance = (q_idx - kv_idx).to(cutlass.Float32)
        logit_scale = cute.full_like(score, cutlass.Float32(aux_scalars[0]))
        bias = slope.load().to(cutlass.Float32) * cute.full_like(score, bias_scale)
        return score * logit_scale - bias * distance

    return alibi


def alibi_score_mod_bwd():
    """The derivative of :func:`alibi_score_mod` in its score: ``grad *
    aux_scalars[0]``."""
    import cutlass
    import cutlass.cute as cute

    @cute.jit
    def alibi_bwd(grad, score, b_idx, h_idx, q_idx, kv_idx, seqlen_info, aux_tensors,
                  aux_scalars):
        return grad * cute.full_like(grad, cutlass.Float32(aux_scalars[0]))

    return alibi_bwd


def alibi_reference(bias_scale, slopes, logit_scale):
    """:func:`alibi_score_mod`'s semantics for :func:`reference`."""
    import jax.numpy as jnp
    slopes = jnp.asarray(slopes, jnp.float32)
    return lambda s, b, h, qi, kj: s * logit_scale - bias_scale * slopes[h] * (qi - kj)


def prefix_lm_mask_mod(prefix: int):
    """A prefix-LM mask: the first `prefix` tokens see each other, the rest
    are causal. `prefix` is captured (compile-time)."""
    import cutlass
    from flash_attn.cute import utils

    import cutlass.cute as cute

    @cute.jit
    def prefix_lm(b_idx, h_idx, q_idx, kv_idx, seqlen_info, aux_tensors):
        p = utils.scalar_to_ssa(prefix, cutlass.Int32)
        return ((q_idx < p) & (kv_idx < p)) | (q_idx >= kv_idx)

    return prefix_lm


def prefix_lm_reference(prefix: int):
    """:func:`prefix_lm_mask_mod`'s semantics for :func:`reference`."""
    return lambda b, h, qi, kj: ((qi < prefix) & (kj < prefix)) | (qi >= kj)


def reference_attention(q, k, v, *, scale: float, mask=None,
                        score=None, sink=None):
    """Attention in float32, pure JAX: (o, lse) in FA4's layouts ((B, Sq, H,
    Dv) and (B, H, Sq); packed (T, H, Dv) and (H, T)). ``sink`` (H,): FA4's
    learnable sink, one more logit per head with no value. Rows with no key
    give o = 0, lse = -inf (the sink's logit with one), as FA4. As
    ``cutecall.attention.jvp.jvp_rule``'s ``forward`` it makes the rule pure JAX (the CPU tests);
    its own ``jax.jvp`` is the reference."""
    import jax.numpy as jnp
    score = score or identity_score
    f32 = jnp.float32
    packed = q.ndim == 3
    if packed:
        q, k, v = q[None], k[None], v[None]
    b, sq, h, _ = q.shape
    sk, hkv, dv = k.shape[1], k.shape[2], v.shape[-1]
    s = scale * jnp.einsum("bqhgd,bkhd->bhgqk", grouped_heads(q, hkv).astype(f32), k.astype(f32))
    z, _ = score(s, jnp.zeros_like(s))
    keep = jnp.ones(z.shape, bool)
    if mask is not None:
        keep = keep & mask(jnp.arange(sq)[:, None], jnp.arange(sk)[None, :])
    if sink is not None:  # one more column
        column = jnp.broadcast_to(sink.astype(f32).reshape(hkv, h // hkv, 1, 1),
                                  z.shape[:-1] + (1,))
        z, keep = jnp.concatenate([z, column], -1), jnp.concatenate([keep, column == column], -1)
    z = jnp.where(keep, z, -jnp.inf)
    m = z.max(-1, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.where(keep, jnp.exp(z - m), 0.0)
    total = e.sum(-1, keepdims=True)
    some = total > 0
    p = (e / jnp.where(some, total, 1.0))[..., :sk]
    o = jnp.einsum("bhgqk,bkhd->bqhgd", p, v.astype(f32)).reshape(b, sq, h, dv)
    lse = jnp.where(some, m + jnp.log(jnp.where(some, total, 1.0)), -jnp.inf)
    lse = lse[..., 0].reshape(b, h, sq)
    return (o[0], lse[0]) if packed else (o, lse)
