"""How :func:`cutecall.quack.mlp.mlp`'s weight gradients meet a data-parallel
gradient all-reduce: the weight-gradient GEMMs make room for the
all-reduce of what was computed before them.

Under ``shard_map`` with the weights replicated, JAX sums each weight's
gradient over the mesh axes (an all-reduce per weight, XLA's NCCL kernel on
its own stream). A one-layer MLP step computes dW2 and dW1 last: dW2's
all-reduce can only run beside dW1's GEMM, and dW1's runs after it. With
*gradient overlap* on (``grad_overlap``, the default inside ``shard_map``):

- on sm90 the weight-gradient GEMMs (sites ``dw1`` and ``dw2``) run one
  CTA per tile (``Tile(persistent=False)``): QuACK's persistent GEMMs hold
  every SM until their last tile, so NCCL's kernel could not start beside
  them (on 4 x H200 its start waited ~820 µs, to the GEMM's tail). QuACK's
  sm100 GEMM has no such form (always persistent): there the weight
  gradients keep their tiles (:func:`flat_weight_grads`) and only the
  blocks below apply;
- with ``grad_chunks=k`` > 1 (opt-in), each of those GEMMs runs in `k`
  column blocks of the gradient -- dW1 split along d, dW2 along d_out --
  each block a weight leaf of its own, so JAX all-reduces each block apart
  and XLA starts a block's all-reduce while the next block's GEMM computes
  (DDP's gradient buckets, inside one GEMM). Blocks cost GEMM efficiency
  (a block is fewer waves of tiles) and NCCL's SMs during the GEMMs; on a
  data-parallel MLP step on H200s they gained at most 0.05x at 4 GPUs, with
  per-tensor all-reduces and the latency-hiding scheduler, and cost 3% at
  2 GPUs, hence opt-in.

    import jax, jax.numpy as jnp
    from jax.sharding import PartitionSpec as P
    from cutecall.quack import mlp as quack_mlp

    mesh = jax.make_mesh((jax.device_count(),), ("b",))
    def loss(w1, w2, x):  # x: this device's tokens; w1, w2 replicated
        out = quack_mlp.mlp(x, w1, w2, "silu", grad_chunks=4)  # 4 blocks: opt-in
        return jax.lax.pmean(out.astype(jnp.float32).mean(), "b")
    grads = jax.jit(jax.shard_map(jax.grad(loss, argnums=(0, 1)), mesh=mesh,
                                  in_specs=(P(), P(), P("b")), out_specs=(P(), P())))

The bits are the same: a block's GEMM sums the same K in the same order.
The weights are split only where the gradient meets them (XLA folds the
slices back into the whole weight for the other GEMMs); the blocks'
gradients are concatenated where the optimizer reads them.
"""

from __future__ import annotations

import dataclasses

from cutecall.quack import tiles as qt

WGRAD_SITES = ("dw1", "dw2")
# The operand of a weight gradient ``a.T @ b`` its blocks slice by columns:
# dW2 = dout.T @ postact along d_out (a), dW1 = dpreact.T @ x along d (b).
SLICED = {"dw2": "a", "dw1": "b"}
AUTO_CHUNKS = 1  # blocks per weight gradient when the caller does not say


def under_shard_map(x) -> bool:
    """Whether `x` varies over ``shard_map`` manual mesh axes (check_vma,
    JAX's default): its gradients' cotangents will be summed over them."""
    from cutecall.jax import varying_axes
    return bool(varying_axes(x))


def resolve(grad_overlap, grad_chunks, x, d: int, d_out: int) -> tuple[bool, int]:
    """(overlap on, blocks per weight gradient) for :func:`mlp`'s arguments,
    or a ValueError naming the argument. ``grad_overlap=None``: on inside
    ``shard_map``; ``grad_chunks=None``: :data:`AUTO_CHUNKS`. Blocks split d
    and d_out into whole 8-element (16-byte) rows."""
    name = "cutecall.quack.mlp"
    if grad_overlap not in (None, True, False):
        raise ValueError(f"{name}: grad_overlap must be None, True or False, "
                         f"got {grad_overlap!r}")
    if grad_chunks is not None and (isinstance(grad_chunks, bool)
                                    or not isinstance(grad_chunks, int) or grad_chunks < 1):
        raise ValueError(f"{name}: grad_chunks must be None or an int >= 1, "
                         f"got {grad_chunks!r}")
    k = AUTO_CHUNKS if grad_chunks is None else grad_chunks
    if not all(n % k == 0 and (n // k) % 8 == 0 for n in (d, d_out)):
        raise ValueError(f"{name}: grad_chunks = {k} must split d = {d} and "
                         f"d_out = {d_out} into blocks of a multiple of 8 columns")
    on = under_shard_map(x) if grad_overlap is None else grad_overlap
    return (True, k) if on else (False, 1)


def split(w1, w2, k: int):
    """(w1, w2) as tuples of `k` blocks -- w1 (hidden, d) along d (axis 1),
    w2 (d_out, hidden) along d_out (axis 0), as dW1 = dpreact.T @ x and
    dW2 = dout.T @ postact split by columns of x and dout -- or themselves
    if k == 1."""
    import jax.numpy as jnp
    if k == 1:
        return w1, w2
    return tuple(jnp.split(w1, k, axis=1)), tuple(jnp.split(w2, k, axis=0))


def whole(w, axis: int):
    """A weight from its blocks (a tuple), or the weight itself."""
    import jax.numpy as jnp
    return jnp.concatenate(w, axis=axis) if isinstance(w, tuple) else w


def blocks(gemm, a, b, k: int, sliced: str):
    """``gemm(a, b)`` -- a weight gradient ``a.T @ b`` -- in `k` blocks of
    columns of operand `sliced` ("a" or "b"), a tuple; one array if k == 1."""
    if k == 1:
        return gemm(a, b)
    n = (a if sliced == "a" else b).shape[1] // k
    cols = [slice(i * n, (i + 1) * n) for i in range(k)]
    if sliced == "a":
        return tuple(gemm(a[:, c], b) for c in cols)
    return tuple(gemm(a, b[:, c]) for c in cols)


def one_block(a, b, k: int, sliced: str):
    """(a, b) -- ShapeDtypeStructs of a weight gradient's operands -- as one
    of :func:`blocks`' `k` blocks sees them."""
    import jax
    def cut(s):
        return jax.ShapeDtypeStruct((s.shape[0], s.shape[1] // k), s.dtype)
    return (cut(a), b) if sliced == "a" else (a, cut(b))


def flat_weight_grads(on: bool, target=None) -> bool:
    """Whether the weight-gradient GEMMs run one CTA per tile: overlap `on`
    and the target's QuACK GEMM has that form (sm90; QuACK's sm100 GEMM is
    always persistent, so there overlap is the blocks of ``grad_chunks``)."""
    return bool(on) and qt.one_cta_per_tile(target)


def flat_tile(tile):
    """`tile` one CTA per tile (pingpong, which needs persistent, becomes
    cooperative); None stays None (tuned)."""
    if tile is None or not tile.persistent:
        return tile
    return dataclasses.replace(tile, pingpong=False, persistent=False)


def flat_candidates(candidates: tuple) -> tuple:
    """The one-CTA-per-tile twins of `candidates`, each once, in order."""
    return tuple(dict.fromkeys(flat_tile(t) for t in candidates))


def site_tiles(site: str, tile, candidates: tuple, on: bool) -> tuple:
    """(tile, candidates) as :func:`~cutecall.quack.mlp.mlp` runs `site`
    with flat weight gradients `on` (:func:`flat_weight_grads`): a weight
    gradient's one CTA per tile, the others as given."""
    if on and site in WGRAD_SITES:
        return flat_tile(tile), flat_candidates(candidates)
    return tile, tuple(candidates)
