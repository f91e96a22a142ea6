"""A fused MLP in JAX on QuACK's GEMMs (Hopper and Blackwell):
``act(x @ w1.T) @ w2.T``, differentiable under ``jit`` and ``grad``, each GEMM
autotuned over QuACK's configurations for the target arch.

    import jax
    import jax.numpy as jnp
    from cutecall.quack import mlp as quack_mlp

    kx, k1, k2 = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (8192, 4096), jnp.bfloat16)         # (tokens, d)
    w1 = jax.random.normal(k1, (11008, 4096), jnp.bfloat16) / 64  # (hidden, d)
    w2 = jax.random.normal(k2, (4096, 11008), jnp.bfloat16) / 105 # (d, hidden)
    quack_mlp.warmup(x, w1, w2, "silu", workers=8)  # optional: compile in parallel
    y = jax.jit(quack_mlp.mlp, static_argnums=3)(x, w1, w2, "silu")
    loss = lambda x, w1, w2: quack_mlp.mlp(x, w1, w2, "silu").astype(jnp.float32).sum()
    dx, dw1, dw2 = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(x, w1, w2)
    quack_mlp.chosen_tiles(x, w1, w2, "silu")       # {"fc1": Tile(...), ...}

The GEMMs are QuACK's MLP (``quack.mlp.mlp_func``), call for call, each a
kernel object QuACK's own compile functions build for the target
(:mod:`~cutecall.quack.mlp_kernels`; the target is
``cutecall.current_target()``, read on every call: ``$CUTECALL_ARCH``, else
the GPU, else sm_90a; sm_90a runs QuACK's sm90 GEMMs, sm_100a/sm_103a its
sm100 GEMMs, any other arch is refused with a ValueError naming it):

=====  =============================================  ==========================
site   computes                                       QuACK's call
=====  =============================================  ==========================
fc1    ``preact, postact = x @ w1.T, act(preact)``    ``gemm_act(x, w1.T)``
fc2    ``out = postact @ w2.T``                       ``gemm(postact, w2.T)``
dact   ``dpreact, postact = dact(dout @ w2, preact)`` ``gemm_dact(dout, w2, preact)``
dw2    ``dw2 = dout.T @ postact``                     ``gemm(dout.T, postact)``
dx     ``dx = dpreact @ w1``                          ``gemm(dpreact, w1)``
dw1    ``dw1 = dpreact.T @ x``                        ``gemm(dpreact.T, x)``
=====  =============================================  ==========================

The GEMMs run outside XLA's command buffers (``allow_cuda_graph=False``):
a GEMM of hundreds of microseconds gains nothing from graph capture, and in
a 2-GPU data-parallel step the captured GEMMs cost ~460 µs a step
(``cutecall.quack.gemm.GRAPHS`` has the numbers).

Data parallel: inside ``shard_map`` with the weights replicated, the weight-
gradient GEMMs run one CTA per tile (sm90; QuACK's sm100 GEMM is always
persistent and keeps its tiles), so dW2's gradient all-reduce runs beside
dW1's GEMM; ``grad_chunks=k`` splits each into k blocks whose all-reduces
start apart (``grad_overlap``, :mod:`~cutecall.quack.mlp_overlap`). Same bits.
Their tiles are tuned over the one-CTA-per-tile twins of `candidates`;
``chosen_tiles(x, w1, w2, act, grad_overlap=True, grad_chunks=k)`` (x the
tokens of one device) reports them.

The backward keeps QuACK's residuals, (x, w1, w2, preact): the dact GEMM
recomputes postact in its epilogue instead of keeping it. Without ``grad``
fc1 stores postact only (QuACK's ``store_preact=False``).

Tiles: each site's GEMM is tuned on its first call per shape by
``cutecall.autotune`` over `candidates` (default the target's space,
``cutecall.quack.tiles.tiles()``: :data:`SM90_TILES`, QuACK's
``_get_sm90_configs()`` without ``swap_ab``, or :data:`SM100_TILES`, its
``_get_sm100_configs()`` without ``swap_ab``), on random inputs of the traced
shapes while ``jit`` traces. Winners persist in cutecall's artifact store: a
later process tunes and compiles nothing. ``CUTECALL_AUTOTUNE_CONFIG=i`` forces
candidate i everywhere, ``CUTECALL_AUTOTUNE=0`` the first. Two differences from
QuACK's torch MLP: on sm90 every GEMM but the data-parallel weight gradients
runs the static persistent scheduler (QuACK's backward asks for the dynamic
one, whose semaphore is a raw pointer; the tile arithmetic and so the bits
are the same; on sm100 a tile's ``clc`` picks QuACK's dynamic scheduler),
and swapped-operand configs are not in the space. Requires ``quack-kernels``
and the CuTe DSL.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from cutecall.quack import mlp_kernels as qmk
from cutecall.quack import mlp_overlap
from cutecall.quack import tiles as qt
from cutecall.quack.tiles import SM90_TILES, SM100_TILES, Tile
from cutecall.quack.mlp_tuning import (  # noqa: F401  (public here; _tuner for tests)
    _tuner, build, chosen_tiles, tuner, tuning_results, warmup)

__all__ = ["mlp", "linear_act", "chosen_tiles", "tuning_results", "warmup", "xla_mlp",
           "jax_activation", "tuner", "build", "ACTIVATIONS", "SITES", "SM90_TILES",
           "SM100_TILES", "Tile"]

# site -> (the kernel it runs, under grad / without)
SITES = {"fc1": ("act", "act_infer"), "fc2": ("fc2", "fc2"), "dact": ("dact", "dact"),
         "dw2": ("wgrad", "wgrad"), "dx": ("dgrad", "dgrad"), "dw1": ("wgrad", "wgrad")}


# QuACK's activation names (``quack.activation.act_fn_map``) with a JAX twin.
ACTIVATIONS = ("gelu_tanh_approx", "gelu_erf", "silu", "relu", "relu_sq", "tanh")


def jax_activation(name: str):
    """The JAX function of QuACK's activation `name` (for references)."""
    import jax
    return {"gelu_tanh_approx": functools.partial(jax.nn.gelu, approximate=True),
            "gelu_erf": functools.partial(jax.nn.gelu, approximate=False),
            "silu": jax.nn.silu, "relu": jax.nn.relu,
            "relu_sq": lambda x: jax.numpy.square(jax.nn.relu(x)),
            "tanh": jax.numpy.tanh}[name]


def mlp(x, w1, w2, activation: str = "gelu_tanh_approx", *, tile=None,
        candidates: tuple | None = None, grad_overlap: bool | None = None,
        grad_chunks: int | None = None):
    """``act(x @ w1.T) @ w2.T`` on QuACK's GEMMs, differentiable in x, w1, w2.

    Args:
      x: (..., d) activations; leading dims are flattened into one token dim.
      w1: (hidden, d), w2: (d_out, hidden): weights as torch's ``nn.Linear``
        holds them. One dtype for all three, bfloat16 or float16; d, hidden
        and d_out multiples of 8 (TMA's 16-byte rows). Tokens are free.
      activation: one of :data:`ACTIVATIONS` (QuACK's names).
      tile: None: autotune every site (see the module docs); a
        :class:`Tile`: that tile for every GEMM; a dict site -> Tile
        (:data:`SITES`): those sites pinned, the others tuned.
      candidates: the tiles tuned over (default None: QuACK's space for the
        target arch, ``cutecall.quack.tiles.tiles()``).
      grad_overlap: whether the weight-gradient GEMMs make room for the
        gradients' all-reduce (:mod:`~cutecall.quack.mlp_overlap`): they run
        one CTA per tile (sm90), in `grad_chunks` blocks whose all-reduces
        start apart. None (default): on inside ``shard_map`` (x varies over
        manual mesh axes), off elsewhere.
      grad_chunks: blocks per weight gradient with overlap on (None: 1); d
        and d_out must split into blocks of a multiple of 8.

    Returns:
      (..., d_out) in x's dtype. Gradients come from QuACK's dact GEMM and
      plain GEMMs (the table in the module docs), in x's dtype.
    """
    target = qt.resolve()
    candidates = qt.tiles(target) if candidates is None else tuple(candidates)
    m, d = _check(x, w1, w2, activation, tile, candidates, target)
    lead, d_out = x.shape[:-1], w2.shape[0]
    overlap, k = mlp_overlap.resolve(grad_overlap, grad_chunks, x, d, d_out)
    if m == 0:
        import jax.numpy as jnp
        return jnp.zeros(lead + (d_out,), x.dtype)
    pinned = tuple(sorted(tile.items())) if isinstance(tile, Mapping) else tile
    flat = mlp_overlap.flat_weight_grads(overlap, target)
    f = _differentiable(str(x.dtype), activation, pinned, candidates, flat, k, target.arch)
    return f(x.reshape(m, d), *mlp_overlap.split(w1, w2, k)).reshape(lead + (d_out,))


def linear_act(x, w, activation: str = "gelu_tanh_approx", *, tile=None,
               candidates: tuple | None = None):
    """``act(x @ w.T)``, x (..., d), w (hidden, d): QuACK's activation-
    epilogue GEMM alone, storing no preact (:func:`mlp`'s fc1 without grad;
    `tile` and `candidates` as there, a dict's "fc1" entry applies). Not
    differentiable: the activation's derivative is fused into the next
    layer's GEMM, so take gradients through :func:`mlp`."""
    target = qt.resolve()
    candidates = qt.tiles(target) if candidates is None else tuple(candidates)
    m, d = _check(x, w, None, activation, tile, candidates, target)
    fc1 = tile.get("fc1") if isinstance(tile, Mapping) else tile
    gemm = _site("act_infer", fc1, str(x.dtype), activation, candidates, target)
    return gemm(x.reshape(m, d), w).reshape(x.shape[:-1] + (w.shape[0],))


def _check(x, w1, w2, activation, tile, candidates, target):
    """(tokens, d), or a ValueError naming the argument (or the arch, for a
    tile the target's QuACK GEMM does not have); w2 None: no fc2."""
    name = "cutecall.quack.mlp"
    if activation not in ACTIVATIONS:
        raise ValueError(f"{name}: activation must be one of {ACTIVATIONS}, "
                         f"got {activation!r}")
    arrays = (("x", x, None), ("w1", w1, 2)) + ((("w2", w2, 2),) if w2 is not None else ())
    for arg, a, rank in arrays:
        if len(getattr(a, "shape", ())) < 2 or (rank and a.ndim != rank):
            raise ValueError(f"{name}: {arg} must be {'2-D' if rank else '(..., d)'}, "
                             f"got shape {getattr(a, 'shape', None)}")
    dtypes = [str(a.dtype) for _, a, _ in arrays]
    if dtypes[0] not in ("bfloat16", "float16") or len(set(dtypes)) > 1:
        raise ValueError(f"{name}: {', '.join(n for n, _, _ in arrays)} must share one "
                         f"dtype, bfloat16 or float16; got {', '.join(dtypes)}")
    d, (hidden, d1) = x.shape[-1], w1.shape
    d_out, hidden2 = w2.shape if w2 is not None else (d, hidden)
    if d1 != d or hidden2 != hidden:
        raise ValueError(f"{name}: shapes do not chain: x {x.shape}, w1 {w1.shape} "
                         f"(hidden, d), w2 {getattr(w2, 'shape', None)} (d_out, hidden)")
    for what, n in (("d", d), ("hidden", hidden), ("d_out", d_out)):
        if n % 8:
            raise ValueError(f"{name}: {what} = {n} must be a multiple of 8 (TMA moves "
                             f"16-byte rows)")
    tiles = tile.items() if isinstance(tile, Mapping) else [("every site", tile)]
    for site, t in tiles:
        if (site not in SITES and site != "every site") or not isinstance(t, (Tile, type(None))):
            raise ValueError(f"{name}: tile must be None, a Tile or a dict of "
                             f"{tuple(SITES)} -> Tile; got {site!r}: {t!r}")
    if not candidates or not all(isinstance(t, Tile) for t in candidates):
        raise ValueError(f"{name}: candidates must be a non-empty sequence of Tile, "
                         f"got {candidates!r}")
    for t in [t for _, t in tiles if t is not None] + list(candidates):
        qt.check(t, target, name)
    return math.prod(x.shape[:-1]), d


@functools.lru_cache(maxsize=None)
def _differentiable(dtype: str, activation: str, pinned, candidates: tuple,
                    flat: bool, chunks: int, arch: str):
    """`flat`: the weight gradients run one CTA per tile
    (``mlp_overlap.flat_weight_grads``)."""
    import cutecall
    target = cutecall.current_target(arch)
    tiles = dict(pinned) if isinstance(pinned, tuple) else {s: pinned for s in SITES}
    whole = mlp_overlap.whole

    def gemm(site: str, under_grad: bool = True):
        kernel = SITES[site][0 if under_grad else 1]
        tile, space = mlp_overlap.site_tiles(site, tiles.get(site), candidates, flat)
        return _site(kernel, tile, dtype, activation, space, target)

    def primal(x, w1, w2):  # w1, w2: weights, or tuples of blocks (mlp_overlap.split)
        return gemm("fc2")(gemm("fc1", under_grad=False)(x, whole(w1, 1)), whole(w2, 0))

    def fwd(x, w1, w2):
        preact, postact = gemm("fc1")(x, whole(w1, 1))
        return gemm("fc2")(postact, whole(w2, 0)), (x, w1, w2, preact)

    def bwd(res, dout):  # quack.mlp: DActLinearFunc then LinearActFunc backward
        x, w1, w2, preact = res
        dpreact, postact = gemm("dact")(dout, whole(w2, 0), preact)
        dw2 = mlp_overlap.blocks(gemm("dw2"), dout, postact, chunks, mlp_overlap.SLICED["dw2"])
        dx = gemm("dx")(dpreact, whole(w1, 1))
        dw1 = mlp_overlap.blocks(gemm("dw1"), dpreact, x, chunks, mlp_overlap.SLICED["dw1"])
        return dx, dw1, dw2

    return cutecall.differentiable(primal).defvjp(fwd, bwd)


def _site(kernel: str, tile, dtype: str, activation: str, candidates: tuple, target):
    if tile is not None:
        return qmk.call(kernel, tile, dtype, activation, target)
    return tuner(kernel, dtype, activation, candidates, target)


def xla_mlp(x, w1, w2, activation: str = "gelu_tanh_approx"):
    """The same MLP in plain JAX (XLA's dot + activation) in the inputs'
    dtype: the benchmark's yardstick; with float32 inputs, the reference."""
    return jax_activation(activation)(x @ w1.T) @ w2.T
