#!/usr/bin/env python3
"""Data-parallel training steps at 1, 2 and 4 GPUs in one process (issue 35):
cutecall's FA4 step against the same step on cuDNN's attention, and the
QuACK MLP step against the same step on XLA's dot (bench/scaling/steps.py).

Each step runs under ``shard_map`` over the first N visible GPUs (the batch
split, the loss averaged with ``pmean``; ``jit`` alone on one GPU) at the
same global batch. Time per step (``us_per_step``): a Python loop of the
jitted step with the weights donated, as training runs, best of --trials
(bench/scaling/chains.loop_us). Beside it, the harness of the first numbers
(bench/timing.jax_wall_us: the difference of a --k2- and a --k1-step chain
of independent steps in one executable): ``cold`` (the chains' second
executions, alternating), ``alt`` (alternating once warm) and ``steady``
(each chain run several times in a row); and cutecall's FFI execute counts
per step (it runs only while XLA records a graph). Command buffers are on
(XLA's default) unless --command-buffers off.

  python bench/scaling/run.py --out bench/results/scaling.json
  python bench/scaling/run.py --dry-run

Writes rows {impl, gpus, processes, us_per_step, speedup} (speedup: the
impl's 1-GPU time over its N-GPU time) to --out and the page --page
(default scaling.md next to it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import page  # noqa: E402
from steps import IMPLS  # noqa: E402

OFF = {"xla_gpu_enable_command_buffer": ""}
CUTECALL_IMPLS = ("fa4_cutecall", "mlp_quack")


def measure(impl, n, args) -> dict:
    import jax
    import chains
    import steps
    row = {"impl": impl, "gpus": n, "processes": 1,
           "command_buffers": args.command_buffers}
    t0 = time.perf_counter()
    try:
        step, operands = steps.on_devices(steps.case(impl, args.sizes), jax.devices()[:n])
        m = chains.measure(step, operands, k1=args.k1, k2=args.k2, warm=args.warm,
                           trials=args.trials, feed=False,
                           options=OFF if args.command_buffers == "off" else None,
                           executes=chains.cutecall_executes if impl in CUTECALL_IMPLS
                           else None)
    except Exception as e:  # noqa: BLE001  one failing row must not lose the others
        row["error"] = f"{type(e).__name__}: {e}"[:2000]
        return row
    finally:
        row["seconds"] = round(time.perf_counter() - t0, 1)
    row.update(us_per_step=m["loop_us"], trials_us=m["loop_all"],
               chain_cold_us_per_step=m["cold_us"], chain_alt_us_per_step=m["alt_us"],
               chain_steady_us_per_step=m["warm_us"], compile_s=round(m["compile_s"], 1))
    row.update({k: v for k, v in m.items() if k.startswith("executes_per_step")})
    return row


def add_speedups(rows) -> None:
    one = {r["impl"]: r["us_per_step"] for r in rows
           if r["gpus"] == 1 and "us_per_step" in r}
    for r in rows:
        if "us_per_step" in r and r["impl"] in one:
            r["speedup"] = one[r["impl"]] / r["us_per_step"]
            r["target"] = 0.95 * r["gpus"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--page", help="markdown page (default: scaling.md next to --out)")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts (those visible are run)")
    ap.add_argument("--command-buffers", choices=("on", "off"), default="on")
    ap.add_argument("--k1", type=int, default=2)
    ap.add_argument("--k2", type=int, default=8)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--sizes", type=json.loads, help="JSON overriding the sizes (smoke tests)")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    impls = args.impls.split(",")
    bad = [i for i in impls if i not in IMPLS]
    if bad:
        ap.error(f"--impls: unknown {bad}; known: {', '.join(IMPLS)}")
    counts = [int(g) for g in args.gpus.split(",")]
    print(f"plan: {', '.join(impls)} at {counts} GPUs, command buffers {args.command_buffers}, "
          f"chains of {args.k1} and {args.k2} steps, {args.warm} warm runs, best of "
          f"{args.trials}")
    if args.dry_run:
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run)")

    import jax
    from report import nvidia_smi, versions, write_json
    gpus = jax.devices()
    counts = [n for n in counts if n <= len(gpus)]
    rows = []
    for n in counts:
        for impl in impls:
            rows.append(measure(impl, n, args))
            r = rows[-1]
            print(f"{impl:13s} {n} GPU  " + (
                f"{r['us_per_step']:9.1f} us/step (chain: cold {r['chain_cold_us_per_step']:.1f},"
                f" steady {r['chain_steady_us_per_step']:.1f})" if "us_per_step" in r
                else r["error"][:300]), flush=True)
    add_speedups(rows)
    result = dict(
        benchmark="scaling", date=datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        command=" ".join(["python3"] + sys.argv), device=f"{len(gpus)} x {gpus[0].device_kind}",
        nvidia_smi=nvidia_smi(), args=vars(args),
        versions=dict(python=platform.python_version(), **versions(
            ("jax", "jaxlib", "cutecall", "nvidia-cutlass-dsl", "quack-kernels"))),
        rows=rows)
    write_json(args.out, result)
    page_path = args.page or os.path.join(os.path.dirname(os.path.abspath(args.out)),
                                          "scaling.md")
    with open(page_path, "w") as f:
        f.write(page.render(result))
    print(page.table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
