"""cutecall.quack.gemm on a GPU: QuACK's GEMM for the GPU's arch (sm90 on
an H100/H200, sm100 on a B200/B300) through cutecall against a float32
reference in several tile configurations of that arch, with M, N and K that
are not multiples of any tile; the autotuned form tunes once, and a second
tuner of the same content takes the stored winner with no timing and no
compile."""

import numpy as np
import pytest

pytest.importorskip("quack")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall import _core  # noqa: E402
from cutecall.quack import gemm as quack_gemm  # noqa: E402

pytestmark = pytest.mark.gpu
Tile = quack_gemm.Tile
# Tiles of the GPU's arch: sm90 pingpong/cooperative; sm100 2-CTA with CLC,
# 2-CTA static, 1-CTA.
TILES = ([Tile(256, 256, 2, 1, clc=True), Tile(256, 128, 2, 2), Tile(128, 256, 1, 1)]
         if (_core.device_arch(0) or "").startswith("sm_10") else
         [Tile(128, 192, 2, 1, pingpong=True), Tile(256, 128, 1, 2), Tile(128, 256, 2, 1)])


def operands(m, n, k, dtype=jnp.bfloat16):
    ka, kb = jax.random.split(jax.random.key(m + n + k))
    return (jax.random.normal(ka, (m, k)).astype(dtype),
            jax.random.normal(kb, (n, k)).astype(dtype))


def reference(a, b):
    return a.astype(jnp.float32) @ b.astype(jnp.float32).T


@pytest.mark.parametrize("tile", TILES, ids=str)
@pytest.mark.parametrize("mnk", [(1000, 1504, 520), (4096, 4096, 1024)], ids=str)
def test_matches_a_float32_reference(tile, mnk):
    a, b = operands(*mnk)
    d = jax.jit(lambda a, b: quack_gemm.matmul(a, b, tile))(a, b)
    assert d.shape == (mnk[0], mnk[1]) and d.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(d, np.float32), np.asarray(reference(a, b)),
                               atol=0.25, rtol=2e-2)


def test_float16_operands():
    a, b = operands(512, 384, 256, jnp.float16)
    np.testing.assert_allclose(np.asarray(quack_gemm.matmul(a, b), np.float32),
                               np.asarray(reference(a, b)), atol=0.25, rtol=2e-2)


def test_autotuned_tunes_once_then_a_second_tuner_takes_the_stored_winner(fresh_key_space):
    # fresh_key_space: an empty store and no kernels in memory. Kernels the
    # earlier tests left in memory would serve the first tuner without
    # reaching this store, and the second tuner would compile its winner.
    a, b = operands(2048, 2048, 2048)
    first = quack_gemm.autotuned(tiles=TILES, warmup=2, rep=5)
    d = jax.jit(first)(a, b)
    result = first.report(a, b)
    # every tile timed; those within 3% of the fastest timed a second time
    assert result.source == "tuned" and len(TILES) <= result.timing_runs <= 2 * len(TILES)
    assert all(t is not None and t > 0 for t in result.times_us)
    np.testing.assert_allclose(np.asarray(d, np.float32), np.asarray(reference(a, b)),
                               atol=0.25, rtol=2e-2)
    cutecall.clear_cache()              # this process forgets its kernels
    before = cutecall.compile_stats()
    second = quack_gemm.autotuned(tiles=TILES, warmup=2, rep=5)
    jax.block_until_ready(second(a, b))
    again = second.report(a, b)
    assert (again.source, again.winner, again.timing_runs) == ("store", result.winner, 0)
    assert cutecall.compile_stats()["compiles"] == before["compiles"]
