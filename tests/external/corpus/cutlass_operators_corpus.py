"""NVIDIA's CUTLASS Operator API (``nvidia-cutlass-operators`` 0.3): its
Hopper GEMM, the operator's own kernel object, called the way the Operator
API calls it.

The Operator API's path (``cutlass/operators``)::

    args = ops.GemmArguments(A, B, out, accumulator_type=torch.float32)
    op = ops.get_operators(args, target_sm="90a", metadata_filter=...)[0]
    op.run(args)              # Sm90StaticPersistentGemmOperator
      op.compile(args)
        cute.compile[GPUArch("sm_90a"), EnableTVMFFI(...)](
            op.impl, A, B, out, get_max_active_clusters(cluster), fake_stream)
      op.impl-compiled(A, B, out, stream)

``op.impl`` (a ``Sm90StaticPersistentGemmKernel``) is what the operator
compiles; the case hands that object to cutecall unchanged, with
``max_active_clusters`` (a ``Constexpr``) as a constexpr, and calls it with
what the operator passes at launch, no output names::

    call(A, B)              # JAX: out returned
    kernel(A, B, out)       # torch: out written

The operator is picked by the Operator API's discovery for the arguments,
filtered to one design (tile 128x128x64 test / 128x256x64 bench, cluster
1x1): bf16 A (M, K) and B (K, N) row-major, float32 accumulation, bf16
out. ``max_active_clusters`` is the Operator API's own
``get_max_active_clusters`` on a GPU, 132 (an H100's or H200's SM count,
cluster 1x1) without one.

Shapes: ``"test"`` (M, N, K) = (1000, 512, 256) (an odd M); ``"bench"``
(8192, 8192, 4096).
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import JaxRandom, TorchRandom, bf16, sds

__all__ = ["KERNELS", "SHAPES", "cases", "case", "operator", "jax_args_from_torch"]

KERNELS = ("gemm_sm90",)
SHAPES = {"test": {"gemm_sm90": (1000, 512, 256)},
          "bench": {"gemm_sm90": (8192, 8192, 4096)}}
TILE = {"test": (128, 128), "bench": (128, 256)}
HOPPER_CLUSTERS_1X1 = 132  # SMs of an H100 / H200: one 1x1 cluster each


def cases(size: str) -> list[Case]:
    """The Hopper GEMM case at `size` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["gemm_sm90"], tile=TILE[size])]


@functools.lru_cache(maxsize=None)
def operator(tile: tuple[int, int]):
    """The Operator API's sm90 GEMM operator for bf16 row-major A, B, out
    with float32 accumulation, tile `tile` x 64, cluster 1x1, as
    ``get_operators`` discovers it (small meta-free CPU tensors describe
    the arguments: discovery reads dtypes and layouts)."""
    import torch

    import cutlass.operators as ops
    a, b = torch.empty(256, 128, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.bfloat16)
    args = ops.GemmArguments(a, b, torch.empty(256, 256, dtype=torch.bfloat16),
                             accumulator_type=torch.float32)

    def wanted(md):
        return "Sm90" in md.operator_name and md.design.tile_shape == (*tile, 64) \
            and md.design.cluster_shape == (1, 1, 1)
    found = ops.get_operators(args, target_sm="90a", metadata_filter=wanted)
    assert found, f"no sm90 operator with tile {tile}"
    return found[0]


def max_active_clusters(op) -> int:
    """What the operator compiles in: its own count on a GPU, else 132."""
    import torch
    if not torch.cuda.is_available():
        return HOPPER_CLUSTERS_1X1
    from cutlass.operators.providers.cutedsl.gemm import sm90_static_persistent as sm90
    return sm90.get_max_active_clusters(op.impl.cluster_shape_mn)


@functools.lru_cache(maxsize=None)
def _calls(tile):
    import cutecall
    import cutecall.torch
    op = operator(tile)
    clusters = max_active_clusters(op)

    def out(a, b):
        return sds((a.shape[0], b.shape[1]), a.dtype)
    return (cutecall.cutlass_call(op.impl, output_shape_dtype=out, max_active_clusters=clusters),
            cutecall.torch.kernel(op.impl, max_active_clusters=clusters))


@functools.lru_cache(maxsize=None)
def _authors_compiled(tile, m, n, k):
    """The Operator API's compiled artifact for these arguments' types and
    layouts (dynamic extents: one compile serves every shape)."""
    import torch

    import cutlass.operators as ops
    args = ops.GemmArguments(*(torch.empty(s, dtype=torch.bfloat16, device="cuda")
                               for s in ((m, k), (k, n), (m, n))),
                             accumulator_type=torch.float32)
    return operator(tile).compile(args)


def case(m: int, n: int, k: int, tile=(128, 128)) -> Case:
    """out (m, n) = A (m, k) @ B (k, n), bf16, through the operator's kernel."""
    def jax_case(concrete, seed):
        r = JaxRandom(concrete, seed)
        return _calls(tile)[0], (r.normal((m, k), bf16()), r.normal((k, n), bf16()))

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=r.device)
        return _calls(tile)[1], (r.normal((m, k), torch.bfloat16),
                                 r.normal((k, n), torch.bfloat16), out)

    def jax_ref(a, b):
        import jax.numpy as jnp
        return jnp.matmul(a.astype(jnp.float32), b.astype(jnp.float32)).astype(a.dtype)

    def torch_ref(a, b, out):
        return (a.float() @ b.float(),)

    def authors_torch(a, b, out):
        # What op.run(GemmArguments(a, b, out, accumulator_type=float32))
        # runs, with its compiled artifact kept (as a user keeps it).
        import torch

        import cutlass.operators as ops
        args = ops.GemmArguments(a, b, out, accumulator_type=torch.float32)
        operator(tile).run(args, compiled_artifact=_authors_compiled(tile, m, n, k),
                           stream=torch.cuda.current_stream(), assume_supported_args=True)

    return Case(f"cutlass_operators.gemm_sm90[bf16 {m}x{n}x{k}]", jax_case, jax_ref,
                torch_case, (2,), torch_ref, authors_torch, None,
                atol=0.125, rtol=2e-2)


def jax_args_from_torch(args):
    """The JAX call's arguments holding the torch call's inputs."""
    import jax.numpy as jnp
    a, b, _out = args
    return tuple(jnp.from_dlpack(t.detach().clone().contiguous()) for t in (a, b))
