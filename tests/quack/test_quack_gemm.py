"""cutecall.quack.gemm on CPU: QuACK's Hopper GEMM lowers for the
cuda platform through cutecall in its tile configurations (compiled for
sm_90a, no GPU needed), with M, N and K dynamic and tied across operands,
so one compile per tile serves every shape; the autotuned form's key."""

import re

import pytest

pytest.importorskip("quack")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall.quack import gemm as quack_gemm  # noqa: E402

S = jax.ShapeDtypeStruct


def lowered(tile, a, b) -> str:
    call = quack_gemm.call(tile, str(a.dtype))
    return jax.jit(call).trace(a, b).lower(lowering_platforms=("cuda",)).as_text()


def test_the_tile_space_is_quack_sm90_space_without_swap_ab():
    from quack.gemm_config import _get_sm90_configs
    theirs = {(c.tile_m, c.tile_n, c.cluster_m, c.cluster_n, c.pingpong)
              for c in _get_sm90_configs() if not c.swap_ab}
    ours = {(t.tile_m, t.tile_n, t.cluster_m, t.cluster_n, t.pingpong)
            for t in quack_gemm.SM90_TILES}
    assert ours == theirs and len(quack_gemm.SM90_TILES) == len(ours) == 22


@pytest.mark.parametrize("tile", [quack_gemm.Tile(128, 192, 2, 1, pingpong=True),
                                  quack_gemm.Tile(256, 128, 1, 2)], ids=str)
def test_a_tile_lowers_once_for_every_shape(tile, fresh_key_space):
    before = cutecall.compile_stats()["compiles"]
    text = lowered(tile, S((4096, 4096), jnp.bfloat16), S((8192, 4096), jnp.bfloat16))
    assert re.search(r'kernel = "quack_gemm_\d+x\d+_c\dx\d_(pp|coop)_bfloat16"', text)
    assert cutecall.compile_stats()["compiles"] == before + 1
    # Other M, N and K (same divisibility class): the same kernel.
    lowered(tile, S((1024, 2048), jnp.bfloat16), S((3072, 2048), jnp.bfloat16))
    assert cutecall.compile_stats()["compiles"] == before + 1
    out = jax.eval_shape(quack_gemm.call(tile, "bfloat16"), S((1000, 64), jnp.bfloat16),
                         S((24, 64), jnp.bfloat16))
    assert (out.shape, out.dtype) == ((1000, 24), jnp.bfloat16)


def test_mismatched_k_is_refused_naming_both_operands():
    with pytest.raises(ValueError,
                       match=r"operand 'mB' dim 1 = 128 must equal operand 'mA' dim 1 = 64 "
                             r"\(tied dim 'k'\)"):
        lowered(quack_gemm.Tile(128, 192, 2, 1, pingpong=True),
                S((256, 64), jnp.bfloat16), S((256, 128), jnp.bfloat16))


def test_the_autotuned_gemm_is_keyed_by_shapes_and_dtype():
    tuned = quack_gemm.autotuned(tiles=quack_gemm.SM90_TILES[:2])
    assert len(tuned.configs) == 2
    a, b = jnp.zeros((16, 8), jnp.bfloat16), jnp.zeros((24, 8), jnp.bfloat16)
    assert tuned.key_fn(a, b) == ((16, 8), (24, 8), "bfloat16")
    assert tuned.candidate(1) is quack_gemm.call(quack_gemm.SM90_TILES[1], "bfloat16")


def test_n_or_k_off_16_byte_rows_is_refused_before_launch():
    # TMA moves 16-byte rows: a bf16 N of 1500 would compute garbage, so the
    # wrapper declares N and K multiples of 8 and cutecall checks them.
    tile = quack_gemm.Tile(128, 192, 2, 1, pingpong=True)
    with pytest.raises(ValueError, match=r"input 'mB': dim 0 = 1500 is not divisible by 8"):
        lowered(tile, S((1000, 512), jnp.bfloat16), S((1500, 512), jnp.bfloat16))
    with pytest.raises(ValueError, match=r"input 'mA': dim 1 = 500 is not divisible by 8"):
        lowered(tile, S((1000, 500), jnp.bfloat16), S((1504, 500), jnp.bfloat16))
