"""cutecall.quack.mlp on CPU: the MLP lowers for the cuda platform
(compiled for sm_90a, no GPU needed) to QuACK's GEMMs -- the activation
epilogue GEMM and fc2 forward; under grad the dact epilogue GEMM and the
plain GEMMs for dW2, dX and dW1 -- one compile per (GEMM, tile) for every
shape; the tuning space is QuACK's sm90 list; the arguments each GEMM
passes have the structure of QuACK's own compile arguments."""

import collections
import dataclasses
import os
import re

import pytest

if "QUACK_ARCH" not in os.environ:  # no GPU here: QuACK sizes for an H100
    os.environ["QUACK_ARCH"] = "sm_90"
pytest.importorskip("quack")
pytest.importorskip("cutlass")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall.quack import mlp as quack_mlp  # noqa: E402
from cutecall.quack import mlp_kernels as qmk  # noqa: E402
from corpus import authors  # noqa: E402

S = jax.ShapeDtypeStruct
BF16 = jnp.bfloat16
TILE = quack_mlp.Tile(128, 192, 2, 1, pingpong=True)
TAG = "128x192_c2x1_pp_bfloat16"


def kernels(fn, *args) -> collections.Counter:
    """kernel name -> custom calls of it in `fn`'s cuda lowering."""
    text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    names = re.findall(r'kernel = "(quack_mlp_[a-z0-9_]+)"', text)
    # QuACK's GEMMs stay out of XLA's command buffers (mlp_kernels.GRAPHS).
    assert len(names) == text.count("custom_call @cutecall_call_no_graph_v1")
    assert "custom_call @cutecall_call_v1" not in text
    return collections.Counter(names)


def operands(tokens=(4, 250), d=512, hidden=1024):
    return S(tokens + (d,), BF16), S((hidden, d), BF16), S((d, hidden), BF16)


def value_and_grads(**kw):
    def loss(x, w1, w2):
        return quack_mlp.mlp(x, w1, w2, "silu", **kw).astype(jnp.float32).sum()
    return jax.value_and_grad(loss, argnums=(0, 1, 2))


@pytest.fixture
def forget_tuning():
    """Tuners are module-level (their decisions are per process): a test
    that forces one leaves none behind."""
    quack_mlp._tuner.cache_clear()
    yield
    quack_mlp._tuner.cache_clear()


def test_the_tuning_space_is_quack_sm90_space_without_swap_ab():
    from quack.gemm_config import _get_sm90_configs
    theirs = [c for c in _get_sm90_configs() if not c.swap_ab]
    assert [qmk.gemm_config(t) for t in quack_mlp.SM90_TILES] == theirs
    for kernel in qmk.GEMMS:
        t = quack_mlp.tuner(kernel, "bfloat16", "silu")
        assert t.configs == [dataclasses.asdict(c) for c in quack_mlp.SM90_TILES]
        assert len(t.configs) == 22
    a, b = S((1000, 512), BF16), S((1024, 512), BF16)
    assert quack_mlp.tuner("act", "bfloat16", "silu").key_fn(a, b) == \
        (((1000, 512), "bfloat16"), ((1024, 512), "bfloat16"))
    # A plain GEMM's tuner ignores the activation: every use shares it.
    assert quack_mlp.tuner("wgrad", "bfloat16", "silu") is \
        quack_mlp.tuner("wgrad", "bfloat16", "relu")


def test_forward_and_backward_lower_to_quacks_gemms_compiled_once(compiles):
    x, w1, w2 = operands()
    assert kernels(value_and_grads(tile=TILE), x, w1, w2) == {
        f"quack_mlp_act_{TAG}_silu": 1,      # fc1: preact and postact
        f"quack_mlp_fc2_{TAG}": 1,           # out = postact @ w2.T
        f"quack_mlp_dact_{TAG}_silu": 1,     # dpreact and postact again
        f"quack_mlp_wgrad_{TAG}": 2,         # dW2 and dW1
        f"quack_mlp_dgrad_{TAG}": 1}         # dX
    assert compiles() == 5
    loss, (dx, dw1, dw2) = jax.eval_shape(value_and_grads(tile=TILE), x, w1, w2)
    assert [(g.shape, g.dtype) for g in (dx, dw1, dw2)] == \
        [(a.shape, a.dtype) for a in (x, w1, w2)]
    # Other tokens, d and hidden: the same five kernels.
    kernels(value_and_grads(tile=TILE), *operands((1000,), 256, 768))
    assert compiles() == 5
    # Without grad, fc1 keeps no preact: QuACK's store_preact=False GEMM.
    fwd = kernels(lambda *a: quack_mlp.mlp(*a, "silu", tile=TILE), x, w1, w2)
    assert fwd == {f"quack_mlp_act_infer_{TAG}_silu": 1, f"quack_mlp_fc2_{TAG}": 1}
    assert compiles() == 6
    out = jax.eval_shape(lambda *a: quack_mlp.mlp(*a, "silu", tile=TILE), x, w1, w2)
    assert (out.shape, out.dtype) == ((4, 250, 512), BF16)


def test_a_non_persistent_tile_is_a_kernel_of_its_own(compiles):
    """``Tile(persistent=False)``: QuACK's GEMM with one CTA per tile (what
    lets another stream's kernel, NCCL's, find SMs beside it); its own
    kernel name and compile; pingpong refuses it (QuACK needs persistent)."""
    x, w1, w2 = operands()
    flat = quack_mlp.Tile(128, 256, 2, 1, persistent=False)
    tiles = {**dict.fromkeys(("fc1", "fc2", "dact", "dx"), TILE), "dw1": flat, "dw2": flat}
    found = kernels(value_and_grads(tile=tiles), x, w1, w2)
    assert found["quack_mlp_wgrad_128x256_c2x1_coop_np_bfloat16"] == 2
    assert f"quack_mlp_wgrad_{TAG}" not in found
    assert compiles() == 5
    assert qmk.authors_args("wgrad", flat, "bfloat16").kernel.is_persistent is False
    assert str(flat) == "128x256 cluster 2x1 coop non-persistent"
    with pytest.raises(ValueError, match="pingpong=True needs persistent=True"):
        quack_mlp.Tile(128, 192, 2, 1, pingpong=True, persistent=False)


def test_autotuned_sites_take_the_forced_config_and_report_it(forget_tuning, monkeypatch):
    forced = quack_mlp.SM90_TILES[3]
    monkeypatch.setenv("CUTECALL_AUTOTUNE_CONFIG", "3")
    x, w1, w2 = operands((300,), 256, 512)
    pinned_dx = quack_mlp.Tile(256, 128, 1, 2)
    names = kernels(value_and_grads(tile={"dx": pinned_dx}), x, w1, w2)
    tag = (f"{forced.tile_m}x{forced.tile_n}_c{forced.cluster_m}x{forced.cluster_n}_"
           f"{'pp' if forced.pingpong else 'coop'}_bfloat16")
    assert names == {f"quack_mlp_act_{tag}_silu": 1, f"quack_mlp_fc2_{tag}": 1,
                     f"quack_mlp_dact_{tag}_silu": 1, f"quack_mlp_wgrad_{tag}": 2,
                     "quack_mlp_dgrad_256x128_c1x2_coop_bfloat16": 1}
    chosen = quack_mlp.chosen_tiles(x, w1, w2, "silu")
    assert chosen == {"fc1": forced, "fc2": forced, "dact": forced, "dw2": forced,
                      "dw1": forced}   # dx was pinned, not tuned
    result = quack_mlp.tuner("act", "bfloat16", "silu").report(S((300, 256), BF16), w1)
    assert (result.winner, result.source) == (3, "forced")


def test_sites_tune_by_timing_and_a_new_tuner_takes_the_stored_winners(
        forget_tuning, compiles, monkeypatch):
    """The tuning path without a GPU: a fake timer (the fastest tile is
    candidates[1], for dX candidates[2]) stands in for the device."""
    from cutecall.services import autotune
    candidates = quack_mlp.SM90_TILES[:3]
    timed = []

    def fake_timer(fn, args, warmup, rep):
        timed.append(fn.__name__)
        fastest = candidates[2 if fn.__name__.startswith("quack_mlp_dgrad") else 1]
        tag = f"_{fastest.tile_m}x{fastest.tile_n}_c{fastest.cluster_m}x{fastest.cluster_n}_"
        return 1.0 if tag in fn.__name__ else 2.0
    monkeypatch.setattr(autotune, "default_timer", lambda args: fake_timer)
    x, w1, w2 = operands((700,), 256, 512)
    grads = value_and_grads(candidates=candidates)
    kernels(grads, x, w1, w2)
    assert len(timed) == 6 * len(candidates)   # six sites, each candidate once
    results = quack_mlp.tuning_results(x, w1, w2, "silu", candidates=candidates)
    assert {s: (r.winner, r.source) for s, r in results.items()} == {
        **dict.fromkeys(("fc1", "fc2", "dact", "dw2", "dw1"), (1, "tuned")),
        "dx": (2, "tuned")}
    assert compiles() == 5                     # the winners only
    # A new process in effect: the winners come from the store, untimed.
    quack_mlp._tuner.cache_clear()
    jax.clear_caches()
    timed.clear()
    kernels(grads, x, w1, w2)
    assert timed == []
    assert quack_mlp.chosen_tiles(x, w1, w2, "silu", candidates=candidates) == {
        **dict.fromkeys(("fc1", "fc2", "dact", "dw2", "dw1"), candidates[1]),
        "dx": candidates[2]}
    assert {r.source for r in quack_mlp.tuning_results(
        x, w1, w2, "silu", candidates=candidates).values()} == {"store"}


def test_overlapped_weight_gradients_tune_flat_blocks_and_report_them(
        forget_tuning, fresh_key_space, monkeypatch):
    """With ``grad_overlap`` (as inside ``shard_map``) the weight-gradient
    sites tune over the one-CTA-per-tile twins at the blocks' shapes, and
    ``tuning_results``/``chosen_tiles`` report them when told how the call
    ran (a fake timer: candidates[1] and its twin are the fastest)."""
    from cutecall.quack import mlp_overlap
    from cutecall.services import autotune
    candidates = quack_mlp.SM90_TILES[:3]
    flat = mlp_overlap.flat_candidates(candidates)
    fast = candidates[1]
    tag = f"_{fast.tile_m}x{fast.tile_n}_c{fast.cluster_m}x{fast.cluster_n}_"
    monkeypatch.setattr(autotune, "default_timer", lambda args: (
        lambda fn, a, warmup, rep: 1.0 if tag in fn.__name__ else 2.0))
    x, w1, w2 = operands((700,), 256, 512)
    kw = dict(candidates=candidates, grad_overlap=True, grad_chunks=2)
    names = kernels(value_and_grads(**kw), x, w1, w2)
    assert names[f"quack_mlp_wgrad{tag}coop_np_bfloat16"] == 2  # dW1's and dW2's blocks
    results = quack_mlp.tuning_results(x, w1, w2, "silu", **kw)
    assert {s: (r.winner, r.source) for s, r in results.items()} == dict.fromkeys(
        quack_mlp.SITES, (1, "tuned"))
    chosen = quack_mlp.chosen_tiles(x, w1, w2, "silu", **kw)
    assert chosen["dw1"] == chosen["dw2"] == flat[1] and not flat[1].persistent
    assert chosen["dx"] == fast
    # Asked as a call without overlap ran, the weight gradients are not decided.
    assert set(quack_mlp.chosen_tiles(x, w1, w2, "silu", candidates=candidates)) == {
        "fc1", "fc2", "dact", "dx"}
    with pytest.raises(ValueError, match="grad_chunks = 3 must split d = 256"):
        quack_mlp.tuning_results(x, w1, w2, "silu", grad_overlap=True, grad_chunks=3)


@pytest.mark.parametrize("gemm", qmk.GEMMS)
def test_each_gemm_passes_quacks_argument_structure(gemm):
    """What each call hands the kernel object (A, B, D, C, QuACK's
    EpilogueArguments with the postact output, its TileSchedulerOptions,
    varlen None) has the structure of what QuACK's compile function passes
    to cute.compile; the object is QuACK's own."""
    m, k, n = S((1000, 512), BF16), S((1024, 512), BF16), S((1000, 1024), BF16)
    a_b_c = {"act": (m, k), "act_infer": (m, k), "fc2": (n, S((512, 1024), BF16)),
             "dact": (m, S((512, 1024), BF16), n), "dgrad": (n, k), "wgrad": (m, n)}[gemm]
    captured = qmk.authors_args(gemm, TILE, "bfloat16", "silu")
    assert type(captured.kernel).__module__.startswith("quack.")
    ours = qmk.launch_args(gemm, TILE, "bfloat16", "silu", *a_b_c)
    assert authors.structure(ours) == authors.structure(captured.args[:len(qmk.PARAMS)])


def test_linear_act_is_the_activation_gemm_alone_and_refuses_grad():
    x, w = S((2, 100, 512), BF16), S((1024, 512), BF16)
    f = lambda x, w: quack_mlp.linear_act(x, w, "relu", tile=TILE)  # noqa: E731
    assert kernels(f, x, w) == {f"quack_mlp_act_infer_{TAG}_relu": 1}
    assert jax.eval_shape(f, x, w).shape == (2, 100, 1024)
    with pytest.raises(cutecall.DifferentiationError):
        jax.eval_shape(jax.grad(lambda x, w: f(x, w).astype(jnp.float32).sum()), x, w)


def test_inside_shard_map_weight_gradients_run_in_flat_blocks_reduced_apart():
    """Data parallel (2 CPU devices, lowered for cuda): inside ``shard_map``
    each weight gradient is one one-CTA-per-tile GEMM and one all-reduce
    (mlp_overlap); ``grad_chunks=4`` makes it 4 GEMMs, an all-reduce each;
    ``grad_overlap=False`` keeps QuACK's persistent (here pingpong) GEMM."""
    from shared import run_on_cpu_devices
    results = run_on_cpu_devices("""
        import collections, os, re
        os.environ.setdefault("QUACK_ARCH", "sm_90")
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from cutecall.quack import mlp as quack_mlp
        mesh = Mesh(np.array(jax.devices()), ("b",))
        tile = quack_mlp.Tile(128, 192, 2, 1, pingpong=True)
        def sds(shape, spec):
            return jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))
        args = (sds((1024, 512), P()), sds((512, 1024), P()), sds((512, 512), P("b")))
        for name, kw in (("auto", {}), ("off", {"grad_overlap": False}),
                         ("four", {"grad_chunks": 4})):
            def loss(w1, w2, x):
                out = quack_mlp.mlp(x, w1, w2, "silu", tile=tile, **kw)
                return out.astype(jnp.float32).sum()
            step = jax.shard_map(jax.grad(loss, argnums=(0, 1)), mesh=mesh,
                                 in_specs=(P(), P(), P("b")), out_specs=(P(), P()))
            text = jax.jit(step).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
            names = collections.Counter(re.findall(r'kernel = "quack_mlp_(wgrad_[a-z0-9_]+)"', text))
            results[name] = [dict(names), text.count("stablehlo.all_reduce"),
                             [list(g.shape) for g in jax.eval_shape(step, *args)]]
    """, n=2)
    # (Blocks of one shape share one lowered function: a kernel's name is
    # in the text once per gradient, dW1's and dW2's.)
    shapes = [[1024, 512], [512, 1024]]
    flat = "wgrad_128x192_c2x1_coop_np_bfloat16"
    assert results == {
        "auto": [{flat: 2}, 2, shapes],
        "off": [{"wgrad_128x192_c2x1_pp_bfloat16": 2}, 2, shapes],
        "four": [{flat: 2}, 8, shapes]}, results


def test_grad_overlap_arguments_are_checked_and_chunks_fit_the_widths():
    from cutecall.quack import mlp_overlap
    x = S((64, 512), BF16)
    assert mlp_overlap.resolve(None, None, x, 512, 512) == (False, 1)  # not in shard_map
    assert mlp_overlap.resolve(True, None, x, 512, 512) == (True, 1)
    assert mlp_overlap.resolve(True, 4, x, 512, 256) == (True, 4)
    assert mlp_overlap.resolve(False, 4, x, 512, 256) == (False, 1)
    assert mlp_overlap.flat_candidates((TILE, quack_mlp.Tile(128, 192, 2, 1))) == \
        (quack_mlp.Tile(128, 192, 2, 1, persistent=False),)
    for kw, match in (({"grad_overlap": "yes"}, "grad_overlap must be None, True or False"),
                      ({"grad_chunks": 0}, "grad_chunks must be None or an int >= 1, got 0"),
                      ({"grad_overlap": True, "grad_chunks": 3},
                       "grad_chunks = 3 must split d = 512 and d_out = 512"),
                      ({"grad_chunks": 128}, "grad_chunks = 128 must split d = 512")):
        with pytest.raises(ValueError, match=match):
            jax.eval_shape(lambda *a: quack_mlp.mlp(*a, tile=TILE, **kw), x,
                           S((1024, 512), BF16), S((512, 1024), BF16))


def test_warmup_with_grad_overlap_adds_the_flat_weight_gradient_kernels(monkeypatch):
    """``warmup(grad_overlap=True)`` also compiles what ``mlp`` runs inside
    ``shard_map``: the weight-gradient GEMM's one-CTA-per-tile twins."""
    seen = []
    monkeypatch.setattr(cutecall, "warmup", lambda tasks, workers: seen.append(
        [(t.args[0], t.args[1]) for t in tasks]) or len(tasks))
    x, w1, w2 = operands()
    plain = quack_mlp.warmup(x, w1, w2, "silu", candidates=(TILE,))
    flat = quack_mlp.warmup(x, w1, w2, "silu", candidates=(TILE,), grad_overlap=True)
    twin = ("wgrad", quack_mlp.Tile(128, 192, 2, 1, persistent=False))
    assert flat == plain + 1 and twin in seen[1] and twin not in seen[0]


@pytest.mark.parametrize("args, kw, match", [
    ((S((64, 512), BF16), S((1024, 512), BF16), S((512, 1024), BF16)),
     {"activation": "swish"}, r"activation must be one of \('gelu_tanh_approx'"),
    ((S((64, 512), BF16), S((1024, 512), jnp.float16), S((512, 1024), BF16)), {},
     r"x, w1, w2 must share one dtype, bfloat16 or float16; got bfloat16, float16, bfloat16"),
    ((S((64, 512), BF16), S((1024, 256), BF16), S((512, 1024), BF16)), {},
     r"shapes do not chain: x \(64, 512\), w1 \(1024, 256\)"),
    ((S((64, 500), BF16), S((1024, 500), BF16), S((512, 1024), BF16)), {},
     r"d = 500 must be a multiple of 8"),
    ((S((64, 512), BF16), S((1020, 512), BF16), S((512, 1020), BF16)), {},
     r"hidden = 1020 must be a multiple of 8"),
    ((S((64, 512), BF16), S((1024, 512), BF16), S((512, 1024), BF16)),
     {"tile": {"fc3": TILE}}, r"tile must be None, a Tile or a dict of \('fc1'"),
], ids=["activation", "dtype", "chain", "d", "hidden", "site"])
def test_bad_arguments_are_named(args, kw, match):
    with pytest.raises(ValueError, match=match):
        jax.eval_shape(lambda *a: quack_mlp.mlp(*a, **kw), *args)
