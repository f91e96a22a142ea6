"""The default kernel pack of :mod:`cutecall.quack`'s GEMM
(``cutecall pack build gemm --arch sm_90a,sm_100a``): QuACK's GEMM for
the target arch's default tile and the tiles its autotuner tries first,
compiled ahead of time (``docs/cache.md``, "Packs"). One kernel serves
every (M, N, K) of a tile, so the pack is a few kernels per arch and dtype.
"""

from __future__ import annotations

DEFAULT_DTYPES = ("bfloat16",)
TILES = 8  # the first tiles of the arch's tuning space, the default first


def configs(arch: str, dtypes=DEFAULT_DTYPES, tiles: int = TILES, head_dims=None):
    """Zero-argument functions, one per (dtype, tile), each lowering
    ``gemm.matmul`` for `arch` (`head_dims` is ignored: the CLI passes it
    to every source)."""
    import cutecall
    from cutecall.quack import gemm
    target = cutecall.current_target(arch)
    default = gemm.default_tile(target)
    space = [default] + [t for t in gemm.tiles(target) if t != default]
    for dtype in dtypes:
        for tile in space[:tiles]:
            yield lambda tile=tile, dtype=dtype: _lower(tile, dtype)


def _lower(tile, dtype: str):
    import jax
    import jax.numpy as jnp

    from cutecall.quack import gemm
    a = jax.ShapeDtypeStruct((4096, 4096), jnp.dtype(dtype))
    b = jax.ShapeDtypeStruct((4096, 4096), jnp.dtype(dtype))
    return jax.jit(lambda a, b: gemm.matmul(a, b, tile)).trace(a, b).lower(
        lowering_platforms=("cuda",))
