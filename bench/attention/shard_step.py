#!/usr/bin/env python3
"""Data-parallel FlashAttention-4 training steps: every local GPU under
``shard_map`` against one GPU, at the same global batch (issue 29's target:
at least 1.9x the one-GPU throughput on 2 GPUs).

The step is ``cutecall.attention.training`` (projections to q, k, v with
GQA, causal FA4 attention through cutecall, squared loss, SGD; the loss
averaged over the devices with ``pmean``), the one
``tests/external/test_gpu_flash_attention.py`` checks on 2 GPUs. Time per
step is wall time from the difference of a 5- and a 25-step chain in one
executable (``bench/scaling/chains.py``: JAX's dispatch cancels out; the GPUs
are the bottleneck at these sizes), each compiled once: steady state (each
chain run several times in a row after 3 executions: XLA's CUDA graphs
replaying, what a training loop runs), best of 3; ``cold`` the chains'
second executions, alternating short and long (what this script timed
before issue 35, recompiling per trial). ``bench/scaling/run.py`` has the
same at 1, 2 and 4 GPUs beside cuDNN's attention.

  python bench/attention/shard_step.py --out shard_step.json [--batch 16 --seqlen 4096]
  python bench/attention/shard_step.py --dry-run      # the plan, no GPU needed
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scaling"))
sys.path.insert(0, HERE)
from run import write  # noqa: E402  (the JSON, written whole: bench/attention/run.py's)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--batch", type=int, default=16, help="global batch")
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--heads-kv", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--embed", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    sizes = dict(batch=args.batch, seqlen=args.seqlen, heads=args.heads,
                 heads_kv=args.heads_kv, head_dim=args.head_dim, embed=args.embed)
    print("plan: one FA4 training step, " + ", ".join(f"{k} {v}" for k, v in sizes.items())
          + "; one GPU against every local GPU (shard_map over the batch)")
    if args.dry_run:
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run)")

    import jax
    from chains import measure
    from cutecall.attention import training as at

    gpus = jax.devices()
    result = dict(benchmark="attention/shard_step", date=str(datetime.date.today()),
                  command=" ".join([os.path.basename(sys.executable)] + sys.argv),
                  device=f"{len(gpus)} x {gpus[0].device_kind}", sizes=sizes,
                  versions=dict(python=platform.python_version(), jax=jax.__version__))
    if len(gpus) < 2 or args.batch % len(gpus):
        result["error"] = (f"needs 2 or more GPUs dividing the batch ({args.batch}); "
                           f"this machine has {len(gpus)}")
        print(result["error"])
        write(args.out, result)
        return 0
    w, x, y = at.problem(jax.random.key(0), **sizes)
    mesh = jax.make_mesh((len(gpus),), ("b",))
    times, cold, loop = {}, {}, {}
    for name, call, args_ in (("1 GPU", jax.jit(at.step), jax.device_put((w, x, y), gpus[0])),
                              (f"{len(gpus)} GPUs", at.sharded_step(mesh),
                               at.place(mesh, w, x, y))):
        m = measure(call, args_, k1=5, k2=25, warm=3, trials=args.trials)
        times[name], cold[name] = m["warm_us"], m["cold_us"]
        loop[name] = m["loop_us"]
        print(f"{name:8s} {times[name]:10.1f} us per step (cold {cold[name]:.1f}, "
              f"loop of donated steps {loop[name]:.1f})")
    speedup = times["1 GPU"] / times[f"{len(gpus)} GPUs"]
    print(f"throughput: {speedup:.2f}x one GPU (target >= {0.95 * len(gpus):.2f}x)")
    result.update(us_per_step=times, cold_us_per_step=cold, loop_us_per_step=loop,
                  speedup=speedup,
                  target=0.95 * len(gpus))
    write(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
