#!/usr/bin/env python3
"""QuACK 0.6.5's all-gather GEMM across GPUs, through cutecall's torch front.

One process per GPU (``torchrun``): QuACK's ``AllGatherRunner`` owns the
transport (symmetric memory: torch's ``symm_mem`` rendezvous over the NCCL
group, copy-engine pushes and per-shard flags, no multicast). Each rank
gathers its A shard and runs, inside ``runner.gather(a_shard)``, either
QuACK's own ``gemm(a_full, b, d, ..., ag_args=ag)`` or cutecall's torch
front on QuACK's kernel object, launched with QuACK's launch-time scheduler
arguments for the same ``ag`` (``corpus.quack_allgather_corpus``, whose
one-GPU case this is across GPUs)::

    with runner.gather(a_shard) as (a_full, ag):
        kernel(a_full, b, d, None, epi, scheduler(ag, True), None)

Checked on every rank: cutecall's D equals QuACK's bit for bit, and both
are near a reference (A gathered by NCCL, matmul in float32). Timed: CUDA
events around ``--iters`` gathers of each path (alternating which goes
first), per rank. Rank 0 writes ``--out``/allgather_multi.json.

  torchrun --standalone --nproc-per-node 2 bench/external/allgather_multi.py --out DIR
  python bench/external/allgather_multi.py --dry-run   # CPU: the kernel compiled
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import use_corpus  # noqa: E402


def paths(ag_mod, b, epi):
    """{name: body(a_full, ag, d)} for QuACK's path and cutecall's."""
    from quack import gemm as qgemm
    kernel = ag_mod._calls()[1]

    def quack(a_full, ag, d):
        qgemm.gemm(a_full, b, d, None, None, *ag_mod.TILE, ag_args=ag)

    def cutecall(a_full, ag, d):
        kernel(a_full, b, d, None, epi, ag_mod.scheduler(ag, True), None)
    return {"authors_torch": quack, "cutecall_torch": cutecall}


def timed(runner, a_shard, body, d, iters: int) -> float:
    import torch
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    for _ in range(iters):
        with runner.gather(a_shard) as (a_full, ag):
            body(a_full, ag, d)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def run(args) -> dict:
    import torch
    import torch.distributed as dist
    from quack.distributed.all_gather_gemm import AllGatherRunner
    use_corpus()
    from corpus import quack_allgather_corpus as ag_mod

    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    m, n, k = args.m, args.n, args.k
    if m % (world * 128):
        raise ValueError(f"--m {m} must split into {world} shards of whole 128-row tiles")
    shard_m = m // world
    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    a_shard = torch.randn(shard_m, k, generator=gen, device=device).to(torch.bfloat16)
    gen.manual_seed(99)  # B: the same on every rank
    b = torch.randn(n, k, generator=gen, device=device).to(torch.bfloat16)
    a_all = torch.empty(m, k, dtype=torch.bfloat16, device=device)
    dist.all_gather_into_tensor(a_all, a_shard)
    ref = a_all.float() @ b.float().T

    runner = AllGatherRunner(shard_m, k, torch.bfloat16, device=device)
    bodies = paths(ag_mod, b, ag_mod.captured().args[4])
    outs = {p: torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
            for p in bodies}
    rec = {"rank": rank, "world": world, "shape": [m, n, k], "errors": {}}
    for p, body in bodies.items():  # compile and check, each path once
        try:
            with runner.gather(a_shard) as (a_full, ag):
                body(a_full, ag, outs[p])
            torch.cuda.synchronize()
            rec[f"{p}_max_err"] = float((outs[p].float() - ref).abs().max())
        except Exception as e:
            rec["errors"][p] = f"{type(e).__name__}: {e}"[:2000]
            traceback.print_exc()
        dist.barrier()
    import cutecall
    rec["cutecall_compiles_after_check"] = cutecall.compile_stats()["compiles"]
    if not rec["errors"]:
        rec["bitwise_equal"] = bool(torch.equal(outs["authors_torch"], outs["cutecall_torch"]))
        samples = {p: [] for p in bodies}
        order = list(bodies)
        for p in order:  # warm-up, untimed: the runner's buffers alternate between gathers
            dist.barrier()
            timed(runner, a_shard, bodies[p], outs[p], 3)
        for trial in range(args.trials):
            for p in (order if trial % 2 == 0 else order[::-1]):
                dist.barrier()
                samples[p].append(timed(runner, a_shard, bodies[p], outs[p], args.iters))
        rec["us"] = {p: {"median": statistics.median(v), "all": v} for p, v in samples.items()}
        rec["cutecall_compiles_after_timing"] = cutecall.compile_stats()["compiles"]
    torch.cuda.synchronize()
    dist.barrier()
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="allgather_multi")
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.dry_run:
        use_corpus()
        from corpus import quack_allgather_corpus as ag_mod
        k, meta = ag_mod.case(*ag_mod.SHAPES["test"]["gemm_allgather"][:3], 2).torch("meta", 0)
        k.compile(*meta)
        print(f"ok: cutecall's torch kernel compiled for 2 shards, writes {k.output_params}")
        return 0
    import torch.distributed as dist
    dist.init_process_group("nccl")
    try:
        rec = run(args)
    except Exception as e:
        rec = {"rank": dist.get_rank(), "errors": {"run": f"{type(e).__name__}: {e}"[:2000]}}
        traceback.print_exc()
    recs = [None] * dist.get_world_size()
    dist.all_gather_object(recs, rec)
    if dist.get_rank() == 0:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "allgather_multi.json"), "w") as f:
            json.dump(recs, f, indent=1)
        for r in recs:
            us = {p: round(v["median"], 1) for p, v in r.get("us", {}).items()}
            print(f"rank {r['rank']}/{r.get('world')}: bitwise {r.get('bitwise_equal')}, "
                  f"max err quack {r.get('authors_torch_max_err')} cutecall "
                  f"{r.get('cutecall_torch_max_err')}, us {us}, errors {r['errors']}")
    ok = all(not r["errors"] and r.get("bitwise_equal") for r in recs)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
