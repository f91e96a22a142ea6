"""Tuning and warm-up for :mod:`cutecall.quack.mlp`'s GEMMs: one
``cutecall.autotune`` per GEMM kernel (``mlp_kernels.GEMMS``) and target arch
over QuACK's tiles for that arch (``cutecall.quack.tiles.tiles()``), keyed by
its operands' shapes; what each site decided; and a parallel warm-up compile
of every candidate. The target is ``cutecall.current_target()`` unless given. ``cutecall.quack.mlp`` re-exports
these names (``mlp.tuner``, ``mlp.warmup``...).

    from cutecall.quack import mlp as quack_mlp
    quack_mlp.warmup(x, w1, w2, "silu", workers=8)   # compile every candidate
    quack_mlp.chosen_tiles(x, w1, w2, "silu")        # after a traced call
"""

from __future__ import annotations

import dataclasses
import functools
import math

from cutecall.quack import mlp_kernels as qmk
from cutecall.quack import mlp_overlap
from cutecall.quack import tiles as qt
from cutecall.quack.tiles import Tile


def tuner(kernel: str, dtype: str, activation: str | None, candidates: tuple | None = None,
          target=None):
    """The ``cutecall.autotune`` of one GEMM kernel (``mlp_kernels.GEMMS``)
    over `candidates` (default: the target's space) on `target`, keyed by
    its operands' shapes and dtypes: one per kernel and arch, shared by the
    sites that run it (dw1 and dw2 decide apart, by shape).
    ``tuner(...).report(*operands)`` tells what it decided."""
    target = qt.resolve(target)
    candidates = qt.tiles(target) if candidates is None else tuple(candidates)
    for t in candidates:
        qt.check(t, target, "cutecall.quack.mlp.tuner")
    return _tuner(kernel, dtype, None if kernel in qmk.PLAIN else activation,
                  candidates, target.arch)


@functools.lru_cache(maxsize=None)
def _tuner(kernel, dtype, activation, candidates, arch):
    import cutecall
    major, minor = qt.capacity(cutecall.current_target(arch))
    where = "" if major == 9 else f"sm{major}{minor}_"  # sm90: the names of old
    return cutecall.autotune(
        functools.partial(build, kernel=kernel, dtype=dtype, activation=activation,
                          arch=arch),
        configs=[dataclasses.asdict(t) for t in candidates], key=_shapes,
        name=f"quack_mlp_{where}{kernel}_{dtype}" + (f"_{activation}" if activation else ""))


def build(tile_m: int, tile_n: int, cluster_m: int, cluster_n: int, pingpong: bool,
          persistent: bool = True, clc: bool = False, *, kernel: str, dtype: str,
          activation: str | None, arch: str | None = None):
    """``autotune``'s build: the call of `kernel` for one configuration on
    `arch` (default: the current target's)."""
    import cutecall
    tile = Tile(tile_m, tile_n, cluster_m, cluster_n, pingpong, persistent, clc)
    return qmk.call(kernel, tile, dtype, activation,
                    cutecall.current_target(arch) if arch else None)


def _shapes(*arrays):
    return tuple((tuple(a.shape), str(a.dtype)) for a in arrays)


def _site_operands(x, w1, w2, chunks: int = 1) -> dict:
    """site -> (kernel, operand ShapeDtypeStructs) for :func:`mlp`'s
    arguments, both fc1 kernels included; the weight gradients' as one of
    `chunks` blocks (``mlp_overlap.one_block``)."""
    import jax
    m, dt = math.prod(x.shape[:-1]), x.dtype
    s = lambda *shape: jax.ShapeDtypeStruct(shape, dt)  # noqa: E731
    (hidden, d), d_out = w1.shape, w2.shape[0]
    X, W1, W2, P, O = s(m, d), s(hidden, d), s(d_out, hidden), s(m, hidden), s(m, d_out)
    return {"fc1": [("act", (X, W1)), ("act_infer", (X, W1))], "fc2": [("fc2", (P, W2))],
            "dact": [("dact", (O, W2, P))],
            "dw2": [("wgrad", mlp_overlap.one_block(O, P, chunks, mlp_overlap.SLICED["dw2"]))],
            "dx": [("dgrad", (P, W1))],
            "dw1": [("wgrad", mlp_overlap.one_block(P, X, chunks, mlp_overlap.SLICED["dw1"]))]}


def _space(site: str, candidates: tuple, flat: bool) -> tuple:
    """The tiles :func:`mlp` tunes `site` over (`flat`:
    ``mlp_overlap.flat_weight_grads``)."""
    return mlp_overlap.site_tiles(site, None, candidates, flat)[1]


def tuning_results(x, w1, w2, activation: str = "gelu_tanh_approx", *,
                   candidates: tuple | None = None, grad_overlap: bool = False,
                   grad_chunks: int = 1) -> dict:
    """site -> ``cutecall.TuningResult`` of :func:`mlp`'s tuners at these
    shapes (arrays or ShapeDtypeStructs; x the tokens one device sees): the
    winner's index in the site's space, the times, and where the decision
    came from ("tuned", "store", "forced", "off"). `grad_overlap` and
    `grad_chunks` as the call ran (inside ``shard_map`` overlap is on by
    default: pass True there). `candidates`: as the call had them (default:
    the target's space). Sites not decided yet are left out."""
    grad_overlap, grad_chunks = mlp_overlap.resolve(  # checked as mlp checks them
        grad_overlap, grad_chunks, x, w1.shape[1], w2.shape[0])
    target = qt.resolve()
    candidates = qt.tiles(target) if candidates is None else tuple(candidates)
    flat = mlp_overlap.flat_weight_grads(grad_overlap, target)
    results = {}
    for site, runs in _site_operands(x, w1, w2, grad_chunks).items():
        space = _space(site, candidates, flat)
        for kernel, operands in runs:
            result = tuner(kernel, str(x.dtype), activation, space, target).report(*operands)
            if result is not None and site not in results:
                results[site] = result
    return results


def chosen_tiles(x, w1, w2, activation: str = "gelu_tanh_approx", *,
                 candidates: tuple | None = None, grad_overlap: bool = False,
                 grad_chunks: int = 1) -> dict:
    """site -> the Tile the tuner picked for :func:`mlp` at these shapes
    (`candidates`, `grad_overlap`, `grad_chunks` as in
    :func:`tuning_results`); sites not tuned yet (or pinned) are left out."""
    on, k = mlp_overlap.resolve(grad_overlap, grad_chunks, x, w1.shape[1], w2.shape[0])
    target = qt.resolve()
    candidates = qt.tiles(target) if candidates is None else tuple(candidates)
    results = tuning_results(x, w1, w2, activation, candidates=candidates,
                             grad_overlap=on, grad_chunks=k)
    flat = mlp_overlap.flat_weight_grads(on, target)
    return {site: _space(site, candidates, flat)[r.winner] for site, r in results.items()}


def _lower_candidate(kernel, tile, dtype, activation, operands, arch=None):
    import jax

    import cutecall
    target = cutecall.current_target(arch) if arch else None
    jax.jit(qmk.call(kernel, tile, dtype, activation, target)).trace(*operands).lower(
        lowering_platforms=("cuda",))


def warmup(x, w1, w2, activation: str = "gelu_tanh_approx", *,
           candidates: tuple | None = None, workers: int = 8, grad_overlap: bool = False):
    """Compiles every candidate of every GEMM :func:`mlp` runs (forward,
    inference and backward) in `workers` processes into the artifact store,
    so tuning loads them instead of compiling one after another; with
    `grad_overlap`, the weight-gradient GEMMs' one-CTA-per-tile twins too
    (what ``mlp`` runs inside ``shard_map``, on sm90). `candidates`:
    default the target's space. Returns ``cutecall.warmup``'s report."""
    import cutecall
    target = qt.resolve()
    candidates = qt.tiles(target) if candidates is None else tuple(candidates)
    for t in candidates:
        qt.check(t, target, "cutecall.quack.mlp.warmup")
    flat = mlp_overlap.flat_weight_grads(grad_overlap, target)
    dtype, tasks, seen = str(x.dtype), [], set()
    for site, runs in _site_operands(x, w1, w2).items():
        for kernel, operands in runs:
            act = None if kernel in qmk.PLAIN else activation
            space = candidates + _space(site, candidates, flat)
            for t in space:  # (`seen` drops the repeats)
                if (kernel, t) not in seen:
                    seen.add((kernel, t))
                    tasks.append(functools.partial(_lower_candidate, kernel, t, dtype,
                                                   act, operands, target.arch))
    return cutecall.warmup(tasks, workers=workers)
