"""What FlashAttention-4's Hopper kernels compute, in plain JAX and PyTorch.

The references of ``fa4_corpus``, in float32 from the kernels' inputs, and
the one layout fact they need from FA4: the order of the float32 dQ
accumulator. Everything here follows from the attention math and from FA4's
source (``flash_attn/cute/flash_bwd_*.py``, 4.0.0b36); nothing imports FA4.

Shapes (``B`` batch, ``S`` seqlen, ``H`` heads, ``D`` head dim, ``Sr`` the
seqlen rounded up to the backward's ``tile_m``):

* forward: ``O = softmax(scale * Q K^T) V`` (causal: key ``j <= i``),
  ``LSE = logsumexp(scale * Q K^T)`` (natural log); Q/K/V/O are (B, S, H, D),
  LSE is (B, H, S).
* backward preprocess (``flash_bwd_preprocess.py``): ``dPsum[b, h, s] =
  sum_d O * dO`` (0 on the padded rows ``S <= s < Sr``), ``LSE_log2 = LSE *
  log2(e)`` (``+inf`` on padded rows, whose LSE the kernel reads as +inf;
  ``0`` where LSE is -inf), both (B, H, Sr); ``dQaccum`` (B, H, Sr * D)
  zeroed.
* backward (``flash_bwd_sm90.py``): ``P = exp2(log2(e) * scale * Q K^T -
  LSE_log2)``, ``dS = P * (dO V^T - dPsum)``, ``dV = P^T dO``, ``dK = scale *
  dS^T Q``, and ``dQaccum += dS K`` (unscaled) in the accumulator order below.
* postprocess (``flash_bwd_postprocess.py``): ``dQ = scale * dQaccum``, read
  back from the accumulator order, rows ``s < S``.

The dQ accumulator: per (b, h) a flat run of ``Sr * D`` floats, one tile of
``tile_m * D`` per m-block; inside a tile, not row-major but the order the
kernel's warpgroups store their WGMMA accumulator fragments in
(:func:`dq_accum_order`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

LOG2E = math.log2(math.e)


@functools.lru_cache(maxsize=None)
def dq_accum_order(tile_m: int, hdim: int, swap_ab: bool,
                   atom_layout_m: int = 1, num_wg: int = 2) -> np.ndarray:
    """``order[j] = row * hdim + col``: the (row, col) of the dQ tile that
    position ``j`` of a ``tile_m * hdim`` accumulator tile holds.

    The writer (``FlashAttentionBackwardSm90``: ``acc_dQ`` -> ``sdQaccum`` ->
    one bulk reduce-add per warpgroup) and the reader
    (``FlashAttentionBackwardPostprocess``, sm90 path) agree on it:

    * the tile is ``num_wg`` chunks of ``X = tile_m * hdim / num_wg`` floats,
      chunk ``w`` written by warpgroup ``w``;
    * in a chunk, thread ``t`` (0..127) stores its accumulator registers
      ``4k .. 4k+3`` at ``512 k + 4 t`` (a 128-bit copy per thread);
    * register ``r`` of thread ``t`` of warpgroup ``w`` is the WGMMA C
      fragment of the tiled MMA ``make_trivial_tiled_mma(atom_layout_mnk=
      (atom_layout_m, num_wg / atom_layout_m) [swapped if swap_ab],
      tiler_mn=(64, N))``: ``r = v + V (mm + MMA_M nn)`` with ``v = v0 + 2 v1
      + 4 v2``, at ``m = 16 warp + lane / 4 + 8 v1``, ``n = 2 (lane % 4) + v0
      + 8 v2`` inside its 64 x N atom (CUTLASS ``CLayout_64xN``);
    * with ``swap_ab`` the MMA computes dQ^T: M runs over head dim, N over
      rows.

    Checked against the DSL's own layout algebra (``partition_C`` of FA4's
    tiled MMA and ``partition_D`` of its copy) for tile_m 80 (swapped) and
    64.
    """
    wg_n = num_wg // atom_layout_m
    tiler = (tile_m // atom_layout_m, hdim // wg_n)  # (rows, cols) per atom
    if swap_ab:
        a, b = wg_n, atom_layout_m
        n_atom, tile_mn = tiler[0], (hdim, tile_m)
    else:
        a, b = atom_layout_m, wg_n
        n_atom, tile_mn = tiler[1], (tile_m, hdim)
    mma_m = tile_mn[0] // (64 * a)
    mma_n = tile_mn[1] // (n_atom * b)
    if mma_m * 64 * a != tile_mn[0] or mma_n * n_atom * b != tile_mn[1] \
            or n_atom % 8:
        raise ValueError(f"no sm90 dQ accumulator layout for tile_m={tile_m}, "
                         f"hdim={hdim}, swap_ab={swap_ab}")
    chunk = tile_m * hdim // num_wg
    j = np.arange(tile_m * hdim)
    w, p = j // chunk, j % chunk
    t, r = (p % 512) // 4, p % 4 + 4 * (p // 512)
    values = n_atom // 2
    v, rest = r % values, r // values
    mm, nn = rest % mma_m, rest // mma_m
    warp, lane = t // 32, t % 32
    m = 16 * warp + lane // 4 + 8 * ((v // 2) % 2) + 64 * (w % a + a * mm)
    n = 2 * (lane % 4) + v % 2 + 8 * (v // 4) + n_atom * (w // a + b * nn)
    row, col = (n, m) if swap_ab else (m, n)
    order = row * hdim + col
    assert np.array_equal(np.sort(order), j)
    return order


def _inverse(order: np.ndarray) -> np.ndarray:
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    return inv


# ---------------------------------------------------------------------------
# JAX

def _einsum(spec, *xs):
    """float32 einsum at full precision (no TF32 on GPUs)."""
    import jax
    import jax.numpy as jnp
    return jnp.einsum(spec, *xs, precision=jax.lax.Precision.HIGHEST)


def jax_attention(q, k, v, scale: float, causal: bool):
    """(O float32 (B, S, H, D), LSE float32 (B, H, S))."""
    import jax
    import jax.numpy as jnp
    f32 = jnp.float32
    s = _einsum("bqhd,bkhd->bhqk", q.astype(f32), k.astype(f32)) * scale
    if causal:
        n = s.shape[-1]
        s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    lse = jax.nn.logsumexp(s, axis=-1)
    p = jnp.exp(s - lse[..., None])
    return _einsum("bhqk,bkhd->bqhd", p, v.astype(f32)), lse


def jax_preprocess(o, do, lse, tile_m: int):
    """(dPsum, LSE_log2, dQaccum), the preprocess kernel's three outputs."""
    import jax.numpy as jnp
    b, s, h, d = o.shape
    pad = -(-s // tile_m) * tile_m - s
    dpsum = _einsum("bshd,bshd->bhs", o.astype(jnp.float32),
                       do.astype(jnp.float32))
    lse_log2 = jnp.where(lse == -jnp.inf, 0.0, lse * LOG2E)
    return (jnp.pad(dpsum, ((0, 0), (0, 0), (0, pad))),
            jnp.pad(lse_log2, ((0, 0), (0, 0), (0, pad)),
                    constant_values=jnp.inf),
            jnp.zeros((b, h, (s + pad) * d), jnp.float32))


def jax_backward(q, k, v, do, lse_log2, dpsum, dq_accum, scale: float,
                 causal: bool, tile_m: int, swap_ab: bool):
    """(dQaccum, dK, dV) as the main backward kernel leaves them."""
    import jax.numpy as jnp
    f32 = jnp.float32
    q, k, v, do = (x.astype(f32) for x in (q, k, v, do))
    n = q.shape[1]
    s = _einsum("bqhd,bkhd->bhqk", q, k) * (scale * LOG2E)
    p = jnp.exp2(s - lse_log2[..., :n, None])
    if causal:
        p = jnp.where(jnp.tril(jnp.ones((n, n), bool)), p, 0.0)
    dp = _einsum("bqhd,bkhd->bhqk", do, v)
    ds = p * (dp - dpsum[..., :n, None])
    dv = _einsum("bhqk,bqhd->bkhd", p, do)
    dk = _einsum("bhqk,bqhd->bkhd", ds, q) * scale
    dq = _einsum("bhqk,bkhd->bhqd", ds, k)
    return dq_accum + jax_to_accum(dq, tile_m, swap_ab), dk, dv


def jax_to_accum(dq, tile_m: int, swap_ab: bool):
    """(B, H, S, D) -> (B, H, Sr * D) in the accumulator order."""
    import jax.numpy as jnp
    b, h, s, d = dq.shape
    blocks = -(-s // tile_m)
    dq = jnp.pad(dq, ((0, 0), (0, 0), (0, blocks * tile_m - s), (0, 0)))
    tiles = dq.reshape(b, h, blocks, tile_m * d)
    return tiles[..., dq_accum_order(tile_m, d, swap_ab)].reshape(b, h, -1)


def jax_postprocess(dq_accum, scale: float, seqlen: int, tile_m: int,
                    swap_ab: bool):
    """dQ (B, S, H, D) float32 from the accumulator."""
    b, h, n = dq_accum.shape
    d = n // (-(-seqlen // tile_m) * tile_m)
    tiles = dq_accum.reshape(b, h, -1, tile_m * d)
    tiles = tiles[..., _inverse(dq_accum_order(tile_m, d, swap_ab))]
    dq = tiles.reshape(b, h, -1, d)[:, :, :seqlen] * scale
    return dq.transpose(0, 2, 1, 3)


# ---------------------------------------------------------------------------
# PyTorch (same math)

def torch_attention(q, k, v, scale: float, causal: bool):
    import torch
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    if causal:
        n = s.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    return torch.einsum("bhqk,bkhd->bqhd", p, v.float()), lse


def torch_preprocess(o, do, lse, tile_m: int):
    import torch
    import torch.nn.functional as F
    b, s, h, d = o.shape
    pad = -(-s // tile_m) * tile_m - s
    dpsum = torch.einsum("bshd,bshd->bhs", o.float(), do.float())
    lse_log2 = torch.where(lse == -math.inf, torch.zeros_like(lse), lse * LOG2E)
    return (F.pad(dpsum, (0, pad)), F.pad(lse_log2, (0, pad), value=math.inf),
            torch.zeros(b, h, (s + pad) * d, dtype=torch.float32,
                        device=o.device))


def torch_backward(q, k, v, do, lse_log2, dpsum, dq_accum, scale: float,
                   causal: bool, tile_m: int, swap_ab: bool):
    import torch
    q, k, v, do = (x.float() for x in (q, k, v, do))
    n = q.shape[1]
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale * LOG2E)
    p = torch.exp2(s - lse_log2[..., :n, None])
    if causal:
        mask = torch.ones(n, n, dtype=torch.bool, device=p.device).tril()
        p = p.masked_fill(~mask, 0.0)
    dp = torch.einsum("bqhd,bkhd->bhqk", do, v)
    ds = p * (dp - dpsum[..., :n, None])
    dv = torch.einsum("bhqk,bqhd->bkhd", p, do)
    dk = torch.einsum("bhqk,bqhd->bkhd", ds, q) * scale
    dq = torch.einsum("bhqk,bkhd->bhqd", ds, k)
    return dq_accum + torch_to_accum(dq, tile_m, swap_ab), dk, dv


def torch_to_accum(dq, tile_m: int, swap_ab: bool):
    import torch
    import torch.nn.functional as F
    b, h, s, d = dq.shape
    blocks = -(-s // tile_m)
    tiles = F.pad(dq, (0, 0, 0, blocks * tile_m - s)).reshape(
        b, h, blocks, tile_m * d)
    order = torch.as_tensor(dq_accum_order(tile_m, d, swap_ab),
                            device=dq.device)
    return tiles[..., order].reshape(b, h, -1)


def torch_postprocess(dq_accum, scale: float, seqlen: int, tile_m: int,
                      swap_ab: bool):
    import torch
    b, h, n = dq_accum.shape
    d = n // (-(-seqlen // tile_m) * tile_m)
    inv = torch.as_tensor(_inverse(dq_accum_order(tile_m, d, swap_ab)),
                          device=dq_accum.device)
    tiles = dq_accum.float().reshape(b, h, -1, tile_m * d)[..., inv]
    dq = tiles.reshape(b, h, -1, d)[:, :, :seqlen] * scale
    return dq.transpose(1, 2)
