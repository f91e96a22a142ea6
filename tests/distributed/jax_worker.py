"""One rank of the data-parallel attention training step under
``jax.distributed`` (started by launch.spawn; RANK, WORLD_SIZE, COORDINATOR
in the environment). Prints ``RESULT=<json>``.

  python jax_worker.py cpu OUT   CPU devices, one per process, gloo
        collectives; the step's attention is plain XLA (cutecall's kernels
        run only on GPUs); every rank also lowers a cutecall kernel under the
        global mesh for CUDA, to count what each process compiles or loads
        from the shared artifact store.
  python jax_worker.py gpu OUT   one local GPU per process (local device =
        rank); the step is cutecall.attention.training's (FA4); WORLD_SIZE 1
        is the single-process reference at the same global batch.

OUT: a folder; rank 0 writes the final weights there as weights.npz.
"""

import json
import os
import sys

MODE, OUT = sys.argv[1], sys.argv[2]
RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
STEPS = 3
SIZES = {"cpu": dict(batch=4, seqlen=64, heads=4, heads_kv=2, head_dim=16, embed=32),
         "gpu": dict(batch=8, seqlen=512, heads=8, heads_kv=2, head_dim=64, embed=256)}[MODE]

if MODE == "cpu":
    os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import cutecall  # noqa: E402
from cutecall.attention import training as at  # noqa: E402


def xla_loss(w, x, y):
    """cutecall.attention.training.loss with causal GQA attention in XLA."""
    d = y.shape[-1]

    def proj(name):
        return (x @ w[name].astype(x.dtype)).reshape(x.shape[:2] + (-1, d))
    q, k, v = (proj(n).astype(jnp.float32) for n in "qkv")
    rep = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, rep, axis=2), jnp.repeat(v, rep, axis=2)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / d ** 0.5
    n = s.shape[-1]
    s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)
    return jnp.mean((o - y.astype(jnp.float32)) ** 2)


def step_fn(mesh):
    """(w, x, y) -> (w, loss): one SGD step, batch split over all processes'
    devices, the loss averaged with pmean."""
    loss = xla_loss if MODE == "cpu" else at.loss

    def local(w, x, y):
        def mean_loss(w):  # over all devices: the global batch's gradient
            value = loss(w, x, y)
            return value if mesh is None else jax.lax.pmean(value, "b")
        value, g = jax.value_and_grad(mean_loss)(w)
        return jax.tree.map(lambda p, g: p - 0.1 * g, w, g), value
    if mesh is None:
        return jax.jit(local)
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P("b"), P("b")),
                                 out_specs=(P(), P())))


def global_array(a, mesh, spec):
    """The array every process holds whole, as one global array on `mesh`."""
    a = np.asarray(a)
    return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec), lambda i: a[i])


def lower_kernel(mesh) -> str:
    """vector_add (cutecall) under shard_map on the global mesh, lowered for
    CUDA: compiles (or loads) the kernel in this process."""
    from cutecall.examples import kernels
    S = jax.ShapeDtypeStruct
    n = 1024 * WORLD
    add = cutecall.cutlass_call(kernels.vector_add,
                                output_shape_dtype=S((n // WORLD,), jnp.float32))
    f = jax.jit(jax.shard_map(add, mesh=mesh, in_specs=(P("b"), P("b")), out_specs=P("b")))
    spec = S((n,), jnp.float32, sharding=NamedSharding(mesh, P("b")))
    return f.trace(spec, spec).lower(lowering_platforms=("cuda",)).as_text()


def main():
    if WORLD > 1:
        if MODE == "cpu":
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
            jax.distributed.initialize(os.environ["COORDINATOR"], WORLD, RANK)
        else:
            jax.distributed.initialize(os.environ["COORDINATOR"], WORLD, RANK,
                                       local_device_ids=[RANK])
    devices = jax.devices() if WORLD > 1 else jax.local_devices()[:1]
    result = {"rank": RANK, "process_index": jax.process_index(),
              "process_count": jax.process_count(), "global_devices": len(devices),
              "local_devices": [str(d) for d in jax.local_devices()]}
    w, x, y = at.problem(jax.random.key(0), **SIZES)
    if MODE == "cpu":  # float32 data: only summation order tells the runs apart
        x, y = x.astype(jnp.float32), y.astype(jnp.float32)
    before = cutecall.compile_stats()
    if WORLD > 1:
        mesh = jax.make_mesh((WORLD,), ("b",), devices=devices)
        step = step_fn(mesh)
        w = jax.tree.map(lambda a: global_array(a, mesh, P()), w)
        x, y = global_array(x, mesh, P("b")), global_array(y, mesh, P("b"))
    else:
        mesh, step = None, step_fn(None)
        w, x, y = jax.device_put((w, x, y), devices[0])
    losses = []
    for _ in range(STEPS):
        w, value = step(w, x, y)
        losses.append(float(np.asarray(jax.device_get(value.addressable_data(0)))))
    stats = cutecall.compile_stats()
    result["step_compiles"] = stats["compiles"] - before["compiles"]
    result["step_disk_hits"] = stats["disk_hits"] - before["disk_hits"]
    result["losses"] = losses
    local = {n: np.asarray(a.addressable_data(0)) for n, a in w.items()}
    result["weights_sum"] = {n: float(a.astype(np.float64).sum()) for n, a in local.items()}
    if RANK == 0:
        np.savez(os.path.join(OUT, "weights.npz"), **local)
    if MODE == "cpu" and WORLD > 1:
        before = cutecall.compile_stats()
        text = lower_kernel(mesh)
        stats = cutecall.compile_stats()
        result["kernel_compiles"] = stats["compiles"] - before["compiles"]
        result["kernel_disk_hits"] = stats["disk_hits"] - before["disk_hits"]
        result["kernel_lowered"] = "cutecall_call" in text and "1024" in text
    print("RESULT=" + json.dumps(result), flush=True)
    if WORLD > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    main()
