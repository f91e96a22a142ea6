"""QuACK's GEMM (``quack.gemm_default_epi.GemmDefaultSm90`` on Hopper,
``GemmDefaultSm100`` on Blackwell) as a JAX function run by cutecall, one
compiled kernel per tile configuration, and an autotuned form that picks the
configuration per problem shape.

    import jax.numpy as jnp
    from cutecall.quack import gemm as quack_gemm

    a = jnp.ones((4096, 4096), jnp.bfloat16)      # (M, K)
    b = jnp.ones((8192, 4096), jnp.bfloat16)      # (N, K): d = a @ b.T
    d = quack_gemm.matmul(a, b)                    # the target's default tile
    d = quack_gemm.matmul(a, b, quack_gemm.Tile(128, 192, 2, 1, pingpong=True))  # sm90
    d = quack_gemm.matmul(a, b, quack_gemm.Tile(256, 256, 2, 1, clc=True))       # sm100
    gemm = quack_gemm.autotuned()                  # cutecall.autotune over tiles()
    d = gemm(a, b)                                 # tuned on the first call per shape

Per target (``cutecall.current_target()``: ``$CUTECALL_ARCH``, else the GPU,
else sm_90a), read on every call: the kernel class and QuACK's device
capacity (:func:`~cutecall.quack.tiles.capacity`), the tuning space
(:func:`tiles`: :data:`SM90_TILES` or :data:`SM100_TILES`, QuACK's own
``_get_sm90_configs`` / ``_get_sm100_configs`` without ``swap_ab``) and the
persistent grid: the launcher asks ``cutlass.utils.HardwareInfo`` for the max
active clusters while it is traced, as QuACK's ``get_max_active_clusters``
does, and cutecall answers with the target device's (H100 SXM 132 SMs, B200
148; ``$CUTECALL_DEVICE`` names another), which is part of the key. A
target QuACK has no kernel for is refused with a ValueError naming the arch.

The kernel object is built as QuACK's ``_compile_gemm`` builds it
(``compile_gemm_kernel``: float32 accumulator, static persistent scheduler
or, for a ``clc`` tile on sm100, cluster launch control), with no epilogue
extras (no C, alpha, beta or bias). A, B and D are 2-D and k-/k-/n-major;
M, N and K stay dynamic and are declared equal across operands (``dims``),
as QuACK's shared symbolic ints do, so one compile per tile serves every
shape. Requires ``quack-kernels`` (the ``external`` extra) and the CuTe DSL.
"""

from __future__ import annotations

import dataclasses
import functools

from cutecall.quack.tiles import (  # noqa: F401  (public here too)
    SM90_TILES, SM100_TILES, Tile, capacity, check, default_tile, resolve, tag, tiles)

__all__ = ["Tile", "SM90_TILES", "SM100_TILES", "tiles", "matmul", "call", "launcher",
           "autotuned", "HOPPER_SMS"]

# H100/H200 SXM's SM count. Kept for old imports: a kernel's persistent grid
# comes from its target's device (``cutecall.current_target().device``).
HOPPER_SMS = 132


def matmul(a, b, tile: Tile | None = None):
    """``a @ b.T``: a (M, K), b (N, K), both bfloat16 or float16; returns
    (M, N) in a's dtype. N and K must be multiples of 8 (TMA's 16-byte rows;
    anything else is refused before launch); M is free. `tile`: None, the
    target's default (:func:`~cutecall.quack.tiles.default_tile`)."""
    target = resolve()
    return call(default_tile(target) if tile is None else tile, str(a.dtype), target)(a, b)


# QuACK's GEMMs run outside XLA's command buffers (``allow_cuda_graph=False``:
# XLA runs each as a plain thunk). A GEMM of hundreds of µs gains nothing
# from graph capture, and on 2 x H200 a data-parallel MLP step with them
# captured took 11969 µs against 11507 with custom calls kept out of the
# command buffers (XLA_FLAGS --xla_gpu_enable_command_buffer=-CUSTOM_CALL;
# the step's only custom calls are these) and 11519 with command buffers
# off; on one GPU the three were equal (21583-21704 µs).
GRAPHS = False


def call(tile: Tile, dtype: str, target=None):
    """The ``cutlass_call`` running `tile` for `dtype` operands on `target`
    (a ``cutecall.Target``; default ``cutecall.current_target()``): one
    per (tile, dtype, arch). A ValueError naming the arch when the target's
    QuACK GEMM has no such tile."""
    target = resolve(target)
    check(tile, target, "cutecall.quack.gemm")
    return _call(tile, dtype, target.arch)


@functools.lru_cache(maxsize=None)
def _call(tile: Tile, dtype: str, arch: str):
    import jax

    import cutecall
    from cutecall import TensorSpec
    target = cutecall.current_target(arch)
    return cutecall.cutlass_call(
        # Built only when no store holds the kernel: a warm process imports
        # neither QuACK nor the CuTe DSL (the recipe names the kernel).
        lambda: launcher(tile, dtype, target),
        recipe=("quack-gemm", tile, dtype, arch), recipe_packages=("quack-kernels",),
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(
            (a.shape[0], b.shape[0]), a.dtype),
        # TMA needs 16-byte rows: K and N multiples of 8 (QuACK's own fake
        # tensors declare the same), checked before every launch.
        input_spec=(TensorSpec(dims=("m", "k"), divisibility=(1, 8)),
                    TensorSpec(dims=("n", "k"), divisibility=(8, 8))),
        output_spec=TensorSpec(dims=("m", "n"), divisibility=(1, 8)),
        allow_cuda_graph=GRAPHS, compile_options=f"--gpu-arch {arch}",
        name=f"quack_gemm_{tag(tile, target)}_{dtype}")


def launcher(tile: Tile, dtype: str, target=None):
    """``launch(stream, mA, mB, mD)``: QuACK's GEMM object for `tile` and
    `target` (default ``cutecall.current_target()``), built under
    ``target.building()`` and called as ``compile_gemm_kernel`` does (no C,
    default epilogue, no varlen). A persistent tile's grid is the max active
    clusters of its cluster size, read from ``HardwareInfo`` while traced
    (the target device's answer); a non-persistent one (sm90) runs a CTA
    per tile."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.utils import HardwareInfo
    from quack.gemm_default_epi import GemmDefaultSm90, GemmDefaultSm100
    from quack.tile_scheduler import TileSchedulerOptions

    from cutecall import jax_to_cutlass_dtype

    target = resolve(target)
    check(tile, target, "cutecall.quack.gemm")
    shape = ((tile.tile_m, tile.tile_n), (tile.cluster_m, tile.cluster_n, 1))
    with target.building():
        if capacity(target)[0] == 9:
            gemm = GemmDefaultSm90(cutlass.Float32, jax_to_cutlass_dtype(dtype), *shape,
                                   pingpong=tile.pingpong, is_persistent=tile.persistent)
        else:
            gemm = GemmDefaultSm100(cutlass.Float32, jax_to_cutlass_dtype(dtype), *shape,
                                    use_clc_persistence=tile.clc)
    cluster_size = tile.cluster_m * tile.cluster_n

    def grid() -> int:  # while traced: the target device's answer
        if not tile.persistent:
            return 0
        return HardwareInfo().get_max_active_clusters(cluster_size)

    @cute.jit
    def quack_gemm(stream: cuda.CUstream, mA: cute.Tensor, mB: cute.Tensor,
                   mD: cute.Tensor):
        scheduler = TileSchedulerOptions(max_active_clusters=cutlass.Int32(grid()),
                                         max_swizzle_size=cutlass.Int32(8))
        gemm(mA, mB, mD, None, gemm.EpilogueArguments(), scheduler, None, stream)

    return quack_gemm


def _key(a, b):
    return (tuple(a.shape), tuple(b.shape), str(a.dtype))


def build(tile_m: int, tile_n: int, cluster_m: int, cluster_n: int, pingpong: bool,
          dtype: str = "bfloat16", persistent: bool = True, clc: bool = False,
          arch: str | None = None):
    """``autotune``'s build: the call for one configuration on `arch`
    (default: the current target's; module-level, so compile workers can
    receive it)."""
    import cutecall
    target = cutecall.current_target(arch) if arch else None
    return call(Tile(tile_m, tile_n, cluster_m, cluster_n, pingpong, persistent, clc), dtype,
                target)


def autotuned(tiles: tuple | None = None, dtype: str = "bfloat16", compile_workers: int = 0,
              warmup: int = 5, rep: int = 30):
    """``cutecall.autotune`` over `tiles` (default: the current target's
    space, :func:`~cutecall.quack.tiles.tiles`), keyed by both shapes and
    the dtype: ``autotuned()(a, b) == a @ b.T`` with the fastest tile."""
    import cutecall
    from cutecall.quack import tiles as qt
    target = resolve()
    space = qt.tiles(target) if tiles is None else tuple(tiles)
    for t in space:
        check(t, target, "cutecall.quack.gemm.autotuned")
    major, minor = capacity(target)
    return cutecall.autotune(
        functools.partial(build, dtype=dtype, arch=target.arch),
        configs=[dataclasses.asdict(t) for t in space], key=_key,
        warmup=warmup, rep=rep, name=f"quack_gemm_sm{major}{minor}_{dtype}",
        compile_workers=compile_workers)
