"""QuACK 0.6.5's all-gather GEMM kernel (``quack.distributed``), called the
way QuACK calls it.

QuACK's path: ``AllGatherRunner.gather(a_shard)`` gathers A's shards into
a symmetric buffer (copy engines, per-shard flags) and yields
``(a_full, ag_args)``; any QuACK GEMM then takes ``ag_args``::

    gemm(a_full, b, d, None, None, 128, 192, 1, 1,
         ag_args=AllGatherArguments(flags, epoch, num_shards, first_shard))
      _compile_gemm(...)  ->  cute.compile(GemmDefaultSm90(...), mA, mB, mD,
          mC, EpilogueArguments(...), TileSchedulerOptions(..., ag=
          AgSchedulerArguments(flags, epoch, num_shards, first_shard,
          num_chunks)), None, stream, None, None)

The kernel gates each tile's first TMA load on ``flags[shard] >= *epoch``.
The case captures QuACK's kernel object and containers from that call on
meta tensors (``quack_gemm_cases.quack_compile_args``, nothing compiled)
and launches it with ``make_scheduler_args(..., ag_args=...)``, QuACK's
launch-time scheduler arguments::

    kernel(a, b, d, None, epi, sched, None)    # torch: d found written
    call(a, b, None, epi, sched, None)         # JAX: d returned

One GPU runs the gate with every shard already arrived (``flags >=
epoch``): the GEMM with QuACK's all-gather schedule, no transport. The
transport itself (symmetric memory across 2+ GPUs) is QuACK's runner's.

Neither front names an output. In JAX the call ``(a, b, None, epi,
sched, None)`` leaves the output to the rule, which puts it at ``mC``
(``mD`` None); the trace of that binding writes no tensor at all, so the
output placement stage traces the next placement, whose trace writes
``mD`` (``outputs.probes``). torch passes ``d`` positionally and finds
``mD`` written.

Shapes: ``"test"`` (M, N, K) = (512, 256, 128), 2 shards (the test's one
GPU: 1); ``"bench"`` (8192, 8192, 4096).
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import JaxRandom, TorchRandom, bf16, sds

__all__ = ["KERNELS", "SHAPES", "cases", "case", "captured", "sharded_jax"]

KERNELS = ("gemm_allgather",)
SHAPES = {"test": {"gemm_allgather": (512, 256, 128, 1)},
          "bench": {"gemm_allgather": (8192, 8192, 4096, 1)}}
TILE = (128, 192, 1, 1)  # tile_M, tile_N, cluster_M, cluster_N


def cases(size: str) -> list[Case]:
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["gemm_allgather"])]


@functools.lru_cache(maxsize=None)
def captured(shards: int = 2):
    """What QuACK's ``gemm(..., ag_args=...)`` hands to ``cute.compile`` on
    sm90 (meta tensors): ``Captured(kernel, args, kwargs)``."""
    import torch
    from quack import gemm as qgemm

    from .quack_gemm_cases import quack_compile_args

    def meta(*shape, dtype=torch.bfloat16):
        return torch.empty(shape, dtype=dtype, device="meta")
    ag = qgemm.AllGatherArguments(meta(shards, dtype=torch.int32),
                                  meta(1, dtype=torch.int32), shards, 0)
    a, b, d = meta(256 * shards, 128), meta(256, 128), meta(256 * shards, 256)
    return quack_compile_args("gemm_add", lambda: qgemm.gemm(a, b, d, None, None, *TILE,
                                                             ag_args=ag))


def ag_args(flags, epoch, shards: int):
    from quack import gemm as qgemm
    return qgemm.AllGatherArguments(flags, epoch, shards, 0)


def scheduler(ag, on_gpu: bool):
    """QuACK's launch-time scheduler arguments with `ag`
    (``make_scheduler_args(..., ag_args=ag)``)."""
    from quack.gemm_tvm_ffi_utils import make_scheduler_args
    clusters = 132
    if on_gpu:
        from quack.cute_dsl_utils import get_max_active_clusters
        clusters = get_max_active_clusters(1, (9, 0))
    fake = captured().args[5]
    return make_scheduler_args(clusters, 8, None, ag_args=ag)._replace(
        raster_order=fake.raster_order)


@functools.lru_cache(maxsize=None)
def _calls():
    import cutecall
    import cutecall.torch
    kernel = captured().kernel

    def out(a, b, c, epi, sched, var):
        return sds((a.shape[0], b.shape[0]), a.dtype)
    return (cutecall.cutlass_call(kernel, output_shape_dtype=out),
            cutecall.torch.kernel(kernel))


def sharded_jax(mesh, on_gpu: bool, axis: str = "x"):
    """The kernel across the devices of `mesh` from JAX, the JAX way:
    ``(a_shards, b, flags, epoch) -> D`` per device, stacked ``(devices, M,
    N)``, jitted. A's rows split over `axis`; XLA's ``all_gather`` (NCCL)
    gathers them, then each device runs the kernel through cutecall's JAX
    front with every shard arrived (QuACK's own cross-GPU transport,
    symmetric memory, is torch's)."""
    import jax
    from jax.sharding import PartitionSpec as P
    call, epi = _calls()[0], captured().args[4]
    shards = mesh.shape[axis]

    def local(a_shard, b, flags, epoch):
        a = jax.lax.all_gather(a_shard, axis, tiled=True)
        sched = scheduler(ag_args(flags, epoch, shards), on_gpu)
        return call(a, b, None, epi, sched, None)[None]
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(axis), P(), P(), P()),
                                 out_specs=P(axis), check_vma=False))


def case(m: int, n: int, k: int, shards: int) -> Case:
    """d (m, n) = a (m, k) @ b (n, k).T through QuACK's all-gather GEMM
    kernel, `shards` shards all arrived."""
    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        if concrete:
            flags, epoch = jnp.ones((shards,), jnp.int32), jnp.ones((1,), jnp.int32)
        else:
            flags, epoch = sds((shards,), jnp.int32), sds((1,), jnp.int32)
        sched = scheduler(ag_args(flags, epoch, shards), concrete)
        return _calls()[0], (r.normal((m, k), bf16()), r.normal((n, k), bf16()), None,
                             captured().args[4], sched, None)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        flags = torch.ones(shards, dtype=torch.int32, device=r.device)
        epoch = torch.ones(1, dtype=torch.int32, device=r.device)
        sched = scheduler(ag_args(flags, epoch, shards), str(r.device).startswith("cuda"))
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=r.device)
        return _calls()[1], (r.normal((m, k), torch.bfloat16), r.normal((n, k), torch.bfloat16),
                             d, None, captured().args[4], sched, None)

    def jax_ref(a, b, c, epi, sched, var):
        import jax.numpy as jnp
        return jnp.matmul(a.astype(jnp.float32), b.astype(jnp.float32).T).astype(a.dtype)

    def torch_ref(a, b, d, c, epi, sched, var):
        return (a.float() @ b.float().T,)

    def authors_torch(a, b, d, c, epi, sched, var):
        # QuACK's gemm with the same all-gather arguments, writing our d.
        from quack import gemm as qgemm
        ag = ag_args(sched.ag.flags, sched.ag.epoch, shards)
        qgemm.gemm(a, b, d, None, None, *TILE, ag_args=ag)

    return Case(f"quack.gemm_allgather[bf16 {m}x{n}x{k} {shards} shard]", jax_case, jax_ref,
                torch_case, (2,), torch_ref, authors_torch, None, atol=0.125, rtol=2e-2)


def jax_args_from_torch(args):
    import jax.numpy as jnp
    a, b, _d, c, epi, sched, var = args

    def copy(t):
        return jnp.from_dlpack(t.detach().clone().contiguous())
    ag = sched.ag._replace(flags=copy(sched.ag.flags), epoch=copy(sched.ag.epoch))
    return (copy(a), copy(b), c, epi, sched._replace(ag=ag), var)
