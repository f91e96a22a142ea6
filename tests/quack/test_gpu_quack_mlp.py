"""cutecall.quack.mlp on a GPU (sm90 on an H100/H200, sm100 on a
B200/B300, each with tiles of its arch): the MLP's output and its three
gradients against a float32 XLA reference, in two tiles, with a token count
that is no multiple of any tile; bit for bit against QuACK's own torch calls
(``gemm_act``, ``gemm_dact``, ``gemm``) pinned to the same tile, GEMM by GEMM
and end to end; the autotuned MLP tunes every site once, and after the
process forgets everything it takes the stored winners, compiling nothing."""

import numpy as np
import pytest

pytest.importorskip("quack")
torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall import _core  # noqa: E402
from cutecall.quack import mlp as quack_mlp  # noqa: E402
from cutecall.quack import mlp_kernels as qmk  # noqa: E402

pytestmark = pytest.mark.gpu
Tile = quack_mlp.Tile
SM100 = (_core.device_arch(0) or "").startswith("sm_10")
# sm100: a 2-CTA tile with QuACK's CLC scheduler and a 1-CTA static one.
TILES = ([Tile(256, 128, 2, 1, clc=True), Tile(128, 256, 1, 1)] if SM100 else
         [Tile(128, 192, 2, 1, pingpong=True), Tile(256, 128, 1, 2)])
SHAPES = [(1000, 512, 1024), (2048, 1024, 2816)]     # (tokens, d, hidden)


def data(tokens, d, hidden, dtype=jnp.bfloat16):
    kx, k1, k2, kd = jax.random.split(jax.random.key(tokens + d + hidden), 4)
    return (jax.random.normal(kx, (tokens, d)).astype(dtype),
            (jax.random.normal(k1, (hidden, d)) / d ** 0.5).astype(dtype),
            (jax.random.normal(k2, (d, hidden)) / hidden ** 0.5).astype(dtype),
            jax.random.normal(kd, (tokens, d)).astype(dtype))


def forward_backward(fn, x, w1, w2, dout):
    """(out, dx, dw1, dw2): a VJP with the cotangent `dout`, jitted."""
    def run(x, w1, w2, dout):
        out, vjp = jax.vjp(fn, x, w1, w2)
        return (out,) + vjp(dout)
    return jax.jit(run)(x, w1, w2, dout)


def reference(x, w1, w2, dout, activation):
    f32 = [a.astype(jnp.float32) for a in (x, w1, w2, dout)]
    return forward_backward(lambda *a: quack_mlp.xla_mlp(*a, activation), *f32)


def assert_close(ours, ref, what, tol=2e-2):
    ours, ref = np.asarray(ours, np.float32), np.asarray(ref, np.float32)
    assert ours.shape == ref.shape, what
    err = np.abs(ours - ref).max() / np.abs(ref).max()
    assert err < tol, f"{what}: max error {err:.3g} of the largest value"


@pytest.mark.parametrize("activation", ["gelu_tanh_approx", "silu", "relu_sq"])
@pytest.mark.parametrize("tile", TILES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_output_and_gradients_match_a_float32_reference(shape, tile, activation):
    x, w1, w2, dout = data(*shape)
    mlp = lambda x, w1, w2: quack_mlp.mlp(x, w1, w2, activation, tile=tile)  # noqa: E731
    ours = forward_backward(mlp, x, w1, w2, dout)
    for name, a, b in zip(("out", "dx", "dw1", "dw2"), ours,
                          reference(x, w1, w2, dout, activation)):
        assert a.dtype == jnp.bfloat16
        assert_close(a, b, name)
    # Without grad fc1 stores no preact; its postact is the same bits.
    np.testing.assert_array_equal(np.asarray(jax.jit(mlp)(x, w1, w2)), np.asarray(ours[0]))


def to_torch(a):
    """The same bits as a CUDA tensor (bfloat16 or float16)."""
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[str(a.dtype)]
    return torch.from_numpy(np.asarray(a).view(np.int16).copy()).cuda().view(dtype)


def bits(a) -> np.ndarray:
    """A 16-bit array's bits, from JAX or torch."""
    if isinstance(a, torch.Tensor):
        return a.contiguous().cpu().view(torch.int16).numpy()
    return np.asarray(a).view(np.int16)


def to_jax(t):
    return jnp.asarray(bits(t).view(jnp.bfloat16))


@pytest.mark.parametrize("tile", TILES, ids=str)
def test_every_gemm_and_the_mlp_equal_quacks_torch_calls_bit_for_bit(tile):
    act = "gelu_tanh_approx"
    x, w1, w2, dout = data(*SHAPES[0])
    theirs = {g: qmk.authors_torch(g, tile, act) for g in qmk.GEMMS}
    ours = {g: jax.jit(qmk.call(g, tile, "bfloat16", act)) for g in qmk.GEMMS}
    tx, tw1, tw2, tdout = map(to_torch, (x, w1, w2, dout))
    # QuACK's MLP, call for call (quack.mlp.mlp_func's forward and backward).
    preact, postact = theirs["act"](tx, tw1)
    out = theirs["fc2"](postact, tw2)
    dpreact, postact2 = theirs["dact"](tdout, tw2, preact)
    dw2, dx, dw1 = (theirs["wgrad"](tdout, postact2), theirs["dgrad"](dpreact, tw1),
                    theirs["wgrad"](dpreact, tx))
    torch.cuda.synchronize()
    pairs = {
        "act": (ours["act"](x, w1), (preact, postact)),
        "act_infer": ((ours["act_infer"](x, w1),), (theirs["act_infer"](tx, tw1),)),
        "fc2": ((ours["fc2"](to_jax(postact), w2),), (out,)),
        "dact": (ours["dact"](dout, w2, to_jax(preact)), (dpreact, postact2)),
        "dgrad": ((ours["dgrad"](to_jax(dpreact), w1),), (dx,)),
        "wgrad": ((ours["wgrad"](dout, to_jax(postact2)),), (dw2,)),
    }
    for gemm, (mine, quacks) in pairs.items():
        for i, (a, b) in enumerate(zip(mine, quacks)):
            np.testing.assert_array_equal(bits(a), bits(b), err_msg=f"{gemm} output {i}")
    # End to end: the differentiable MLP is these six calls.
    mlp = lambda x, w1, w2: quack_mlp.mlp(x, w1, w2, act, tile=tile)  # noqa: E731
    for name, a, b in zip(("out", "dx", "dw1", "dw2"),
                          forward_backward(mlp, x, w1, w2, dout), (out, dx, dw1, dw2)):
        np.testing.assert_array_equal(bits(a), bits(b), err_msg=name)


def test_float16_operands():
    x, w1, w2, dout = data(512, 256, 768, jnp.float16)
    mlp = lambda x, w1, w2: quack_mlp.mlp(x, w1, w2, "relu", tile=TILES[0])  # noqa: E731
    for name, a, b in zip(("out", "dx", "dw1", "dw2"), forward_backward(mlp, x, w1, w2, dout),
                          reference(x, w1, w2, dout, "relu")):
        assert a.dtype == jnp.float16
        assert_close(a, b, name)


@pytest.mark.skipif(SM100, reason="QuACK's sm100 GEMM has no one-CTA-per-tile form")
def test_non_persistent_weight_gradients_are_the_persistent_ones_bit_for_bit():
    """``Tile(persistent=False)`` for dW1 and dW2 (one CTA per tile) computes
    every tile as the persistent kernel does: the same bits."""
    x, w1, w2, dout = data(*SHAPES[1])
    tile = Tile(256, 128, 1, 2)
    flat = {**dict.fromkeys(("fc1", "fc2", "dact", "dx"), tile),
            "dw1": Tile(256, 128, 1, 2, persistent=False),
            "dw2": Tile(256, 128, 1, 2, persistent=False)}
    ours = forward_backward(lambda *a: quack_mlp.mlp(*a, "silu", tile=flat), x, w1, w2, dout)
    base = forward_backward(lambda *a: quack_mlp.mlp(*a, "silu", tile=tile), x, w1, w2, dout)
    for name, a, b in zip(("out", "dx", "dw1", "dw2"), ours, base):
        assert np.array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32)), name


@pytest.mark.skipif(len(jax.devices()) < 2, reason="needs 2 GPUs")
def test_data_parallel_gradients_with_overlap_are_those_without_bit_for_bit():
    """On 2 GPUs under ``shard_map``: the weight gradients with gradient
    overlap (the default there: one-CTA-per-tile GEMMs; and in 2 and 4
    column blocks, an all-reduce each) equal those of QuACK's persistent
    GEMM, bit for bit (two ranks sum in either order alike), and every
    device holds the same."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:2]), ("b",))
    x, w1, w2, dout = data(2048, 1024, 2816)
    put = lambda a, spec: jax.device_put(a, NamedSharding(mesh, spec))  # noqa: E731
    args = (put(w1, P()), put(w2, P()), put(x, P("b")), put(dout, P("b")))

    def grads(**kw):
        def local(w1, w2, x, dout):
            _, vjp = jax.vjp(lambda w1, w2: quack_mlp.mlp(x, w1, w2, "silu",
                                                          tile=TILES[1], **kw), w1, w2)
            return vjp(dout)
        step = jax.shard_map(local, mesh=mesh, in_specs=(P(), P(), P("b"), P("b")),
                             out_specs=(P(), P()))
        text = jax.jit(step).lower(*args).as_text()  # XLA may combine these small ones
        return jax.jit(step)(*args), text.count("stablehlo.all_reduce")

    base, n_base = grads(grad_overlap=False)
    for kw, n in (({}, 2), ({"grad_chunks": 2}, 4), ({"grad_chunks": 4}, 8)):
        ours, n_ours = grads(**kw)
        assert (n_base, n_ours) == (2, n), kw
        for name, a, b in zip(("dw1", "dw2"), ours, base):
            shards = [np.asarray(s.data, np.float32) for s in a.addressable_shards]
            assert all(np.array_equal(s, shards[0]) for s in shards), (name, kw)
            assert np.array_equal(shards[0], np.asarray(b, np.float32)), (name, kw)


def test_autotuned_mlp_tunes_each_site_then_takes_the_stored_winners(fresh_key_space):
    # fresh_key_space: an empty store of its own AND no kernel earlier tests
    # compiled in this process (a kernel served from memory is never
    # written to this test's store, and the second pass would compile it).
    quack_mlp._tuner.cache_clear()
    x, w1, w2, dout = data(2048, 1024, 2816)
    mlp = lambda x, w1, w2: quack_mlp.mlp(x, w1, w2, "silu", candidates=TILES)  # noqa: E731
    got = forward_backward(mlp, x, w1, w2, dout)
    for name, a, b in zip(("out", "dx", "dw1", "dw2"), got,
                          reference(x, w1, w2, dout, "silu")):
        assert_close(a, b, name)
    results = quack_mlp.tuning_results(x, w1, w2, "silu", candidates=TILES)
    assert set(results) == set(quack_mlp.SITES)
    assert {r.source for r in results.values()} == {"tuned"}
    assert all(len(r.times_us) == len(TILES) for r in results.values())
    chosen = quack_mlp.chosen_tiles(x, w1, w2, "silu", candidates=TILES)
    # A new process in effect: no tuner, no kernel, no trace in memory.
    quack_mlp._tuner.cache_clear()
    cutecall.clear_cache()
    jax.clear_caches()
    before = cutecall.compile_stats()["compiles"]
    again = forward_backward(mlp, x, w1, w2, dout)
    results = quack_mlp.tuning_results(x, w1, w2, "silu", candidates=TILES)
    assert {site: r.source for site, r in results.items()} == dict.fromkeys(
        quack_mlp.SITES, "store")
    assert quack_mlp.chosen_tiles(x, w1, w2, "silu", candidates=TILES) == chosen
    assert cutecall.compile_stats()["compiles"] == before
    for a, b in zip(got, again):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
