#!/usr/bin/env python3
"""QuACK 0.6.5's all-gather GEMM kernel across GPUs from JAX, the JAX way.

QuACK's own cross-GPU path is torch's: ``AllGatherRunner`` pushes A's row
shards into symmetric memory with copy engines and per-shard flags, and
the GEMM gates each tile on its shard's flag (``allgather_multi.py`` runs
it through cutecall's torch front). JAX has no symmetric memory; in JAX
the gather is XLA's ``all_gather`` (NCCL), after which every device runs
the same kernel object with the same containers through cutecall's JAX
front, every shard arrived (``flags`` = ``epoch``), one process, a
``shard_map`` over all visible GPUs::

    def local(a_shard, b, flags, epoch):
        a = jax.lax.all_gather(a_shard, "x", tiled=True)
        return call(a, b, None, epi, scheduler(ag_args(flags, epoch, n)), None)

(``corpus.quack_allgather_corpus.sharded_jax``, which the tests use too.)

What differs from QuACK's path is the transport alone: the gather ends
before the GEMM starts (QuACK's tiles start as their shard arrives).

Checked: every device's D equals, bit for bit, the same kernel run on one
GPU over the whole A (the one-GPU corpus case), and is near a float32
reference. Timed: the wall time of a chain of calls in one ``jit`` (``bench/timing.
jax_chain``: K2 calls minus K1, per call), gather included, beside XLA's
own all-gather + ``jnp.dot`` in the same chain; ``--rounds`` interleaved.

  python bench/external/allgather_jax.py --out DIR        # every visible GPU (2+)
  python bench/external/allgather_jax.py --dry-run        # CPU: 2 devices, lowered for sm_90a
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH)
from harness import use_corpus  # noqa: E402

K1, K2 = 5, 15


def programs(ag_mod, mesh, on_gpu: bool) -> dict:
    """{path: jitted (a_shards, b, flags, epoch) -> D per device, (N, M, N)}:
    the corpus's ``sharded_jax`` and XLA's own all-gather + dot."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    def xla_path(a_shard, b, flags, epoch):
        a = jax.lax.all_gather(a_shard, "x", tiled=True)
        return jnp.dot(a, b.T, preferred_element_type=jnp.float32).astype(a.dtype)[None]
    xla = jax.jit(jax.shard_map(xla_path, mesh=mesh, in_specs=(P("x"), P(), P(), P()),
                                out_specs=P("x"), check_vma=False))
    return {"cutecall_jax": ag_mod.sharded_jax(mesh, on_gpu), "xla_dot": xla}


def inputs(mesh, m: int, n: int, k: int, shards: int, abstract: bool):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    rows, full = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())
    shapes = [((m, k), jnp.bfloat16, rows), ((n, k), jnp.bfloat16, full),
              ((shards,), jnp.int32, full), ((1,), jnp.int32, full)]
    if abstract:
        return [jax.ShapeDtypeStruct(s, d, sharding=sh) for s, d, sh in shapes]
    ka, kb = jax.random.split(jax.random.key(1234))
    a = jax.random.normal(ka, (m, k), jnp.float32).astype(jnp.bfloat16)
    b = jax.random.normal(kb, (n, k), jnp.float32).astype(jnp.bfloat16)
    values = [a, b, jnp.ones((shards,), jnp.int32), jnp.ones((1,), jnp.int32)]
    return [jax.device_put(v, sh) for v, (_, _, sh) in zip(values, shapes)]


def dry_run(m, n, k) -> dict:
    import jax
    from jax.sharding import Mesh
    import numpy as np
    use_corpus()
    from corpus import quack_allgather_corpus as ag_mod
    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    args = inputs(mesh, m, n, k, 2, abstract=True)
    text = programs(ag_mod, mesh, False)["cutecall_jax"].trace(*args).lower(
        lowering_platforms=("cuda",)).as_text()
    return {"all_gather": "all_gather" in text, "cutecall_calls": text.count("cutecall_call")}


def measure(m, n, k, rounds: int) -> dict:
    import jax
    import numpy as np
    from jax.sharding import Mesh
    use_corpus()
    from corpus import quack_allgather_corpus as ag_mod
    from timing import chain_wall_us, jax_chain
    import cutecall
    devices = jax.devices()
    shards = len(devices)
    mesh = Mesh(np.array(devices), ("x",))
    args = inputs(mesh, m, n, k, shards, abstract=False)
    fns = programs(ag_mod, mesh, True)
    d = np.asarray(fns["cutecall_jax"](*args), np.float32)             # (N, M, N)
    one = ag_mod._calls()[0]
    a_full = jax.device_put(np.asarray(args[0]), devices[0])
    sched = ag_mod.scheduler(ag_mod.ag_args(*(jax.device_put(np.asarray(x), devices[0])
                                              for x in args[2:4]), shards), True)
    d_one = np.asarray(one(a_full, jax.device_put(np.asarray(args[1]), devices[0]), None,
                           ag_mod.captured().args[4], sched, None), np.float32)
    ref = np.asarray(args[0], np.float32) @ np.asarray(args[1], np.float32).T
    rec = {"devices": shards, "device": devices[0].device_kind, "shape": [m, n, k],
           "bitwise_equal_one_gpu": [bool(np.array_equal(d[i], d_one)) for i in range(shards)],
           "max_err": float(np.abs(d - ref[None]).max()),
           "compiles_after_check": cutecall.compile_stats()["compiles"]}
    chains = {p: (jax_chain(f, args, K1), jax_chain(f, args, K2)) for p, f in fns.items()}
    for s, lng in chains.values():
        s(), lng(), s()
    samples = {p: [] for p in chains}
    for r in range(rounds):
        for p in (list(chains) if r % 2 == 0 else list(chains)[::-1]):
            samples[p].append(chain_wall_us(*chains[p], K1, K2))
    rec["us"] = {p: {"median": statistics.median(v), "all": v} for p, v in samples.items()}
    rec["compiles_after_timing"] = cutecall.compile_stats()["compiles"]
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/cutecall_out") + "/allgather_jax")
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    rec = dry_run(512, 256, 128) if a.dry_run else measure(a.m, a.n, a.k, a.rounds)
    print(json.dumps(rec))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "allgather_jax.json.tmp"), "w") as f:
        json.dump(rec, f, indent=1)
    os.replace(os.path.join(a.out, "allgather_jax.json.tmp"),
               os.path.join(a.out, "allgather_jax.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
