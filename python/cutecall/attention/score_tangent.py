"""The score term of FlashAttention-4's tangent, in XLA (forward mode,
:mod:`~cutecall.attention.jvp`): ``sum_j P_ij Z'_ij v_j - c_i o_i`` and
``c_i = sum_j P_ij Z'_ij``, as a ``lax.scan`` over key blocks with P taken
exactly from the forward's lse; and what it applies, in JAX: FA4's masks
(causal, sliding window, ``seqused_q/k``, packed varlen segments:
:data:`MaskFn`) and score maps (identity, softcap: :data:`ScoreFn`).
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

from .reference import grouped_heads, identity_score

# mask(q_idx (Sq, 1), k_idx (1, n)) -> bool, broadcasting; True keeps a key.
MaskFn = Callable
# score(s, s_dot) -> (z, z_dot): the logits of scaled scores, and their tangent.
ScoreFn = Callable


def softcap_score(softcap: float) -> ScoreFn:
    """FA4's softcap on scaled scores: z = softcap tanh(s / softcap),
    z' = (1 - tanh^2(s / softcap)) s'."""
    import jax.numpy as jnp

    def score(s, s_dot):
        t = jnp.tanh(s / softcap)
        return softcap * t, (1.0 - t * t) * s_dot
    return score


def _window(causal: bool, window_size) -> tuple:
    """(left, right): keys allowed from diagonal - left to diagonal + right
    (None: unbounded), the diagonal bottom-right aligned; ``causal`` is
    right = 0; both negative: no window (FA4's resolution)."""
    left, right = window_size
    if left is not None and right is not None and left < 0 and right < 0:
        left = right = None
    return left, 0 if causal else right


def _band(d, left, right):
    """d = k_pos - q_pos - (seqlen_k - seqlen_q): inside the window?"""
    ok = True
    if right is not None:
        ok = d <= right
    if left is not None:
        ok = ok & (d >= -left)
    return ok


def dense_mask(seqlen_q: int, seqlen_k: int, *, causal: bool = False,
               window_size=(None, None), seqused_q=None,
               seqused_k=None) -> Optional[MaskFn]:
    """FA4's mask for (B, S, H, D) layouts: causal / sliding window,
    bottom-right aligned on each example's used lengths (``seqused_q/k``,
    int (B,); then the mask is (B, 1, 1, Sq, n)). None: nothing masked."""
    left, right = _window(causal, window_size)
    if left is None and right is None and seqused_q is None and seqused_k is None:
        return None
    def per_example(n, used):  # broadcasts against (B, Hkv, G, Sq, n) tiles
        return n if used is None else used[:, None, None, None, None]
    lq, lk = per_example(seqlen_q, seqused_q), per_example(seqlen_k, seqused_k)

    def mask(q_idx, k_idx):
        ok = _band(k_idx - q_idx - (lk - lq), left, right)
        if seqused_q is not None:
            ok = ok & (q_idx < lq)
        return ok if seqused_k is None else ok & (k_idx < lk)
    return mask


def varlen_mask(cu_seqlens_q, cu_seqlens_k, *, causal: bool = False,
                window_size=(None, None), seqused_q=None, seqused_k=None) -> MaskFn:
    """The mask of FA4's packed varlen layout ((total, H, D) tensors):
    a query sees keys of its own sequence only, causal and windows per
    sequence (bottom-right aligned on the used lengths), nothing past
    ``seqused_q``/``seqused_k``. Indices are positions in the packed arrays."""
    import jax.numpy as jnp
    left, right = _window(causal, window_size)
    count = cu_seqlens_q.shape[0] - 1

    def locate(cu, idx, used):
        seg = jnp.searchsorted(cu, idx, side="right") - 1
        at = jnp.clip(seg, 0, count - 1)
        pos, length = idx - cu[at], (cu[1:] - cu[:-1] if used is None else used)[at]
        return seg, pos, length, (seg >= 0) & (seg < count) & (pos < length)

    def mask(q_idx, k_idx):
        sq, pq, lq, iq = locate(cu_seqlens_q, q_idx, seqused_q)
        sk, pk, lk, ik = locate(cu_seqlens_k, k_idx, seqused_k)
        return iq & ik & (sq == sk) & _band(pk - pq - (lk - lq), left, right)
    return mask


def score_tangent(q, k, v, o, lse, q_dot, k_dot, *, scale: float,
                  mask: Optional[MaskFn] = None, score: ScoreFn = identity_score,
                  block_k: int = 128):
    """The score term of attention's tangent, in XLA over key blocks.

    Args:
      q, q_dot: (B, Sq, H, D); k, k_dot: (B, Sk, Hkv, D); v: (B, Sk, Hkv, Dv);
        any float dtype (products accumulate in float32).
      o, lse: the forward's output (B, Sq, H, Dv) and log-sum-exp (B, H, Sq)
        (-inf for a row with no key).
      scale: the softmax scale; mask, score: see :data:`MaskFn`,
        :data:`ScoreFn` (None: no mask); block_k: keys per scan step.

    Returns:
      (term (B, Sq, H, Dv), c (B, H, Sq)), float32: term_i =
      sum_j P_ij Z'_ij v_j - c_i o_i and c_i = sum_j P_ij Z'_ij (= lse'_i).
    """
    import jax
    import jax.numpy as jnp
    f32 = jnp.float32
    b, sq, h, _ = q.shape
    sk, hkv, dv = k.shape[1], k.shape[2], v.shape[-1]
    n = -(-sk // block_k)
    dot = functools.partial(jnp.einsum, preferred_element_type=f32)

    def key_blocks(x):  # (n, B, block_k, Hkv, D), zero-padded
        x = jnp.pad(x, ((0, 0), (0, n * block_k - sk), (0, 0), (0, 0)))
        return jnp.moveaxis(x.reshape(b, n, block_k, hkv, x.shape[-1]), 1, 0)

    qg, qg_dot = grouped_heads(q, hkv), grouped_heads(q_dot, hkv)
    lse_g = lse.astype(f32).reshape(b, hkv, h // hkv, sq, 1)
    q_idx = jnp.arange(sq)[:, None]

    def step(carry, block):
        acc, c = carry
        start, kb, kb_dot, vb = block
        k_idx = start + jnp.arange(block_k)[None, :]
        s = scale * dot("bqhgd,bkhd->bhgqk", qg, kb)
        s_dot = scale * (dot("bqhgd,bkhd->bhgqk", qg_dot, kb)
                         + dot("bqhgd,bkhd->bhgqk", qg, kb_dot))
        z, z_dot = score(s, s_dot)
        keep = k_idx < sk
        if mask is not None:
            keep = keep & mask(q_idx, k_idx)
        w = jnp.where(keep, jnp.exp(z - lse_g), 0.0) * z_dot   # P * Z'
        acc = acc + dot("bhgqk,bkhd->bqhgd", w, vb.astype(f32))
        return (acc, c + w.sum(-1)), None

    init = (jnp.zeros((b, sq, hkv, h // hkv, dv), f32),
            jnp.zeros((b, hkv, h // hkv, sq), f32))
    blocks = (jnp.arange(n) * block_k, key_blocks(k), key_blocks(k_dot), key_blocks(v))
    (acc, c), _ = jax.lax.scan(step, init, blocks)
    rows = jnp.moveaxis(c, -1, 1)[..., None]                      # (B, Sq, Hkv, G, 1)
    o = grouped_heads(o, hkv).astype(f32)
    term = acc - jnp.where(rows == 0, 0.0, rows * o)   # rows with no key: o unset
    return term.reshape(b, sq, h, dv), c.reshape(b, h, sq)
