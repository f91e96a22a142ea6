"""NVIDIA's CUTLASS Operator API (``nvidia-cutlass-operators`` 0.3): its
Blackwell dense GEMM, the operator's own kernel object, called the way the
Operator API calls it.

The operator is the one the Operator API's discovery gives for bf16
row-major A (M, K), B (K, N), out (M, N), float32 accumulation, on
``target_sm="100a"``, filtered to one design: ``PersistentDenseGemmOperator``
(``PersistentDenseGemmKernel``), tile 256x128x64, cluster 2x1, 2-CTA MMA,
TMA store, static persistent scheduler. Its ``compile`` does::

    cute.compile(op.impl, A, B, out, stream,
                 get_max_active_clusters(op.impl.cluster_shape_mn), op.impl.epilogue_op)

and its run ``compiled(A, B, out, stream)``. The case hands ``op.impl`` to
cutecall unchanged with ``max_active_clusters`` (a ``Constexpr``) as the
operator computes it -- ``HardwareInfo().get_max_active_clusters(2)``,
answered by the target (a B200: 74) -- and no output names::

    call(A, B)              # JAX: out returned
    kernel(A, B, out)       # torch: out written

(M, N, K) = (1000, 512, 256) (an odd M).
"""

from __future__ import annotations

import functools

from .sm100 import Sm100Case, building, meta, sds

KERNELS = ("gemm_sm100",)
M, N, K = 1000, 512, 256
TILE, CLUSTER = (256, 128, 64), (2, 1, 1)


def cases() -> list[Sm100Case]:
    return [case()]


@functools.lru_cache(maxsize=None)
def operator():
    """The Operator API's sm100 GEMM operator of this design, as
    ``get_operators`` discovers it (small CPU tensors describe the
    arguments: discovery reads dtypes and layouts)."""
    import torch

    import cutlass.operators as ops
    a, b = torch.empty(256, 128, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.bfloat16)
    args = ops.GemmArguments(a, b, torch.empty(256, 256, dtype=torch.bfloat16),
                             accumulator_type=torch.float32)

    def wanted(md):
        d = md.design
        return md.operator_name.startswith("cutedsl.PersistentDenseGemmOperator_sm100") \
            and d.tile_shape == TILE and d.cluster_shape == CLUSTER and d.use_2cta_mma \
            and type(d.tile_scheduler).__name__ == "StaticPersistentTileSchedulerMetadata"
    found = ops.get_operators(args, target_sm="100a", metadata_filter=wanted)
    assert found, f"no sm100 operator with tile {TILE}, cluster {CLUSTER}"
    return found[0]


@functools.lru_cache(maxsize=None)
def max_active_clusters() -> int:
    """What the operator's ``compile`` passes, on the target."""
    from cutlass.operators.providers.cutedsl.gemm import sm100_persistent
    with building():
        return sm100_persistent.get_max_active_clusters(operator().impl.cluster_shape_mn)


def _jax():
    import cutecall
    import jax.numpy as jnp

    def out(a, b):
        return sds((a.shape[0], b.shape[1]), a.dtype)
    call = cutecall.cutlass_call(operator().impl, output_shape_dtype=out,
                                 max_active_clusters=max_active_clusters())
    return call, (sds((M, K), jnp.bfloat16), sds((K, N), jnp.bfloat16))


def _torch():
    import cutecall.torch
    k = cutecall.torch.kernel(operator().impl, max_active_clusters=max_active_clusters())
    return k, (meta((M, K)), meta((K, N)), meta((M, N)))


def case() -> Sm100Case:
    return Sm100Case(name=f"cutlass_operators.gemm_sm100[bf16 {M}x{N}x{K}]", jax=_jax,
                     torch=_torch, how="ops.get_operators(args, target_sm='100a')[i]"
                                       ".compile(args) / .run(args)")
