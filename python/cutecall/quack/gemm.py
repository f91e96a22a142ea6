"""QuACK's Hopper GEMM (``quack.gemm_default_epi.GemmDefaultSm90``) as a
JAX function run by cutecall, one compiled kernel per tile configuration,
and an autotuned form that picks the configuration per problem shape.

    import jax.numpy as jnp
    from cutecall.quack import gemm as quack_gemm

    a = jnp.ones((4096, 4096), jnp.bfloat16)      # (M, K)
    b = jnp.ones((8192, 4096), jnp.bfloat16)      # (N, K): d = a @ b.T
    d = quack_gemm.matmul(a, b, quack_gemm.Tile(128, 192, 2, 1, pingpong=True))
    gemm = quack_gemm.autotuned()                  # cutecall.autotune over SM90_TILES
    d = gemm(a, b)                                 # tuned on the first call per shape

The kernel object is built as QuACK's ``_compile_gemm`` builds it for sm90
(``compile_gemm_kernel``: persistent, static tile scheduler, float32
accumulator), with no epilogue extras (no C, alpha, beta or bias). A, B and D
are 2-D and k-/k-/n-major, as QuACK's unbatched torch path passes them; M, N
and K stay dynamic and are declared equal across operands (``dims``), as
QuACK's shared symbolic ints do, so one compile per tile serves every shape.
:data:`SM90_TILES` is QuACK's own sm90 tuning space (``_get_sm90_configs``)
without ``swap_ab``. Requires ``quack-kernels`` (the ``external`` extra) and
the CuTe DSL; runs on Hopper.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

__all__ = ["Tile", "SM90_TILES", "matmul", "autotuned", "HOPPER_SMS"]

HOPPER_SMS = 132  # H100/H200 SXM; the persistent scheduler's CTAs per wave


@dataclasses.dataclass(frozen=True)
class Tile:
    """One GEMM configuration: CTA tile (M, N), cluster (M, N), pingpong
    (two consumer warp groups on alternate tiles) or cooperative, and
    persistent (QuACK's default: one CTA per SM, each looping over tiles)
    or not (one CTA per tile: CTAs leave as their tile ends, so a kernel
    on another stream, NCCL's, finds SMs; pingpong needs persistent)."""

    tile_m: int
    tile_n: int
    cluster_m: int = 1
    cluster_n: int = 1
    pingpong: bool = False
    persistent: bool = True

    def __post_init__(self):
        if self.pingpong and not self.persistent:
            raise ValueError(f"cutecall.quack.Tile: pingpong=True needs persistent=True "
                             f"(QuACK's sm90 pingpong GEMM), got {self!r}")

    def __str__(self):
        kind = "pingpong" if self.pingpong else "coop"
        return (f"{self.tile_m}x{self.tile_n} cluster {self.cluster_m}x{self.cluster_n} "
                f"{kind}" + ("" if self.persistent else " non-persistent"))

    @property
    def suffix(self) -> str:
        """The kernel-name part of the configuration: ``128x192_c2x1_pp``."""
        return (f"{self.tile_m}x{self.tile_n}_c{self.cluster_m}x{self.cluster_n}"
                f"_{'pp' if self.pingpong else 'coop'}" + ("" if self.persistent else "_np"))


def _sm90_tiles() -> tuple:
    # quack.gemm_config._get_sm90_configs(): cooperative (256, n) and
    # (128, 224/256); pingpong (128, n) and (192, 128); clusters 1x2 and 2x1.
    tile_n = (128, 160, 192, 208)
    coop = [(256, n) for n in tile_n] + [(128, 224), (128, 256)]
    pingpong = [(128, n) for n in tile_n] + [(192, 128)]
    mn = [(m, n, False) for m, n in coop] + [(m, n, True) for m, n in pingpong]
    return tuple(Tile(m, n, cm, cn, pp)
                 for (m, n, pp), (cm, cn) in itertools.product(mn, [(1, 2), (2, 1)]))


SM90_TILES = _sm90_tiles()


def matmul(a, b, tile: Tile = Tile(128, 192, 2, 1, pingpong=True)):
    """``a @ b.T``: a (M, K), b (N, K), both bfloat16 or float16; returns
    (M, N) in a's dtype. N and K must be multiples of 8 (TMA's 16-byte rows;
    anything else is refused before launch); M is free."""
    return call(tile, str(a.dtype))(a, b)


# QuACK's GEMMs run outside XLA's command buffers (``allow_cuda_graph=False``:
# XLA runs each as a plain thunk). A GEMM of hundreds of µs gains nothing
# from graph capture, and in a 2-GPU data-parallel MLP step
# (bench/results/scaling.md, 2026-11-27, 2 x H200) the step with them
# captured took 11969 µs against 11507 with custom calls kept out of the
# command buffers (XLA_FLAGS --xla_gpu_enable_command_buffer=-CUSTOM_CALL;
# the step's only custom calls are these) and 11519 with command buffers
# off; on one GPU the three were equal (21583-21704 µs).
GRAPHS = False


@functools.lru_cache(maxsize=None)
def call(tile: Tile, dtype: str, sms: int = HOPPER_SMS):
    """The ``cutlass_call`` running `tile` for `dtype` operands."""
    import jax

    import cutecall
    from cutecall import TensorSpec
    return cutecall.cutlass_call(
        launcher(tile, dtype, sms),
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(
            (a.shape[0], b.shape[0]), a.dtype),
        # TMA needs 16-byte rows: K and N multiples of 8 (QuACK's own fake
        # tensors declare the same), checked before every launch.
        input_spec=(TensorSpec(dims=("m", "k"), divisibility=(1, 8)),
                    TensorSpec(dims=("n", "k"), divisibility=(8, 8))),
        output_spec=TensorSpec(dims=("m", "n"), divisibility=(1, 8)),
        allow_cuda_graph=GRAPHS,
        name=f"quack_gemm_{tile.suffix}_{dtype}")


def launcher(tile: Tile, dtype: str, sms: int = HOPPER_SMS):
    """``launch(stream, mA, mB, mD)``: builds QuACK's sm90 GEMM object for
    `tile` and calls it as ``compile_gemm_kernel`` does (no C, default
    epilogue, static persistent scheduler over ``sms // cluster size``
    clusters, or one CTA per tile for a non-persistent `tile`; no varlen)."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from quack.gemm_default_epi import GemmDefaultSm90
    from quack.tile_scheduler import TileSchedulerOptions

    from cutecall import jax_to_cutlass_dtype
    from cutecall._driver.dsl import dsl_arch

    with dsl_arch("sm_90a"):
        gemm = GemmDefaultSm90(cutlass.Float32, jax_to_cutlass_dtype(dtype),
                               (tile.tile_m, tile.tile_n), (tile.cluster_m, tile.cluster_n, 1),
                               pingpong=tile.pingpong, is_persistent=tile.persistent)
    max_clusters = sms // (tile.cluster_m * tile.cluster_n) if tile.persistent else 0

    @cute.jit
    def quack_gemm_sm90(stream: cuda.CUstream, mA: cute.Tensor, mB: cute.Tensor,
                        mD: cute.Tensor):
        scheduler = TileSchedulerOptions(max_active_clusters=cutlass.Int32(max_clusters),
                                         max_swizzle_size=cutlass.Int32(8))
        gemm(mA, mB, mD, None, gemm.EpilogueArguments(), scheduler, None, stream)

    return quack_gemm_sm90


def _key(a, b):
    return (tuple(a.shape), tuple(b.shape), str(a.dtype))


def build(tile_m: int, tile_n: int, cluster_m: int, cluster_n: int, pingpong: bool,
          dtype: str = "bfloat16", persistent: bool = True):
    """``autotune``'s build: the call for one configuration (module-level,
    so compile workers can receive it)."""
    return call(Tile(tile_m, tile_n, cluster_m, cluster_n, pingpong, persistent), dtype)


def autotuned(tiles=SM90_TILES, dtype: str = "bfloat16", compile_workers: int = 0,
              warmup: int = 5, rep: int = 30):
    """``cutecall.autotune`` over `tiles`, keyed by both shapes and the
    dtype: ``autotuned()(a, b) == a @ b.T`` with the fastest tile."""
    import cutecall
    return cutecall.autotune(
        functools.partial(build, dtype=dtype),
        configs=[dataclasses.asdict(t) for t in tiles], key=_key,
        warmup=warmup, rep=rep, name=f"quack_gemm_sm90_{dtype}",
        compile_workers=compile_workers)
