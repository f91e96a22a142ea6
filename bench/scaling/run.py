"""Data-parallel training steps at 1, 2 and 4 GPUs: cutecall's FA4 step
against the same step on XLA's cuDNN attention, and the QuACK MLP step
against the same MLP on XLA's dot (``bench/scaling/steps.py``), each in one
process over N GPUs and with one process per GPU.

Data parallel at the same global batch: the weights replicated, the batch
split, the loss averaged with ``pmean`` under ``shard_map`` (``jit`` alone
on one GPU); XLA's defaults (command buffers on). Time per step: a Python
loop of the jitted step with the weights donated, as training runs
(``bench/scaling/loop.py``), --steps steps per GPU in each trial (every
trial the same global batches at every GPU count), best and median of
--trials. Speedup: the step's 1-GPU time over its N-GPU time; target 0.95·N.
Every measurement runs in a child process (``bench/scaling/processes.py``).

  python -m bench.scaling.run --out bench/results/scaling.json    # writes scaling.md beside it
  python -m bench.scaling.run --dry-run                            # the plan, no GPU
  python -m bench.scaling.run --render bench/results/scaling.json  # the page again, no GPU

On the GPU machine: ``bash tools/gpu/gpu bench scaling`` (``tools/gpu/README.md``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys

from bench.scaling import page, processes
from bench.scaling.steps import IMPLS


def plan(args) -> list[tuple[str, str, int]]:
    """(impl, "one process" | "processes", GPUs) in the order they run."""
    out = [(impl, "one process", 0) for impl in args.impls]
    out += [(impl, "processes", n) for n in args.gpus if n > 1 for impl in args.impls]
    return out


def add_speedups(rows: list[dict]) -> None:
    """speedup (best trials) and speedup_median: the impl's 1-GPU row's
    time over the row's; target 0.95·N."""
    one = {r["impl"]: r for r in rows
           if r["gpus"] == 1 and r["processes"] == 1 and "us_per_step" in r}
    for r in rows:
        base = one.get(r["impl"])
        if "us_per_step" in r and base:
            r["speedup"] = round(base["us_per_step"] / r["us_per_step"], 3)
            r["speedup_median"] = round(base["us_per_step_median"] / r["us_per_step_median"], 3)
            r["target"] = round(0.95 * r["gpus"], 2)


def measure_all(args, opts: dict) -> tuple[list[dict], str | None]:
    rows, device = [], None
    for impl, how, n in plan(args):
        if how == "one process":
            got = processes.launch_one_process(impl, args.gpus, opts, args.timeout)
            device = device or got.get("device")
            found = got.get("rows") or [{"impl": impl, "gpus": 1, "processes": 1,
                                         "error": got.get("error")}]
        else:
            got = processes.launch_ranks(impl, n, opts, args.timeout)
            found = [dict(got, impl=impl, gpus=n, processes=n)]
        rows += found
        for r in found:
            print(page.row_line(r), flush=True)
    return rows, device


def parse(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.scaling.run",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="the JSON; the page (scaling.md) is written beside it")
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"of {','.join(IMPLS)}")
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts (those visible run)")
    ap.add_argument("--steps", type=int, default=20, help="steps per GPU in one trial")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per child process")
    ap.add_argument("--sizes", type=json.loads, help="JSON overriding the steps' sizes")
    ap.add_argument("--dry-run", action="store_true", help="print the plan")
    ap.add_argument("--render", metavar="JSON", help="write the page of this JSON, beside it")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--rank-of", help=argparse.SUPPRESS)
    ap.add_argument("--procs", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.impls = args.impls.split(",")
    bad = [i for i in args.impls if i not in IMPLS]
    if bad:
        ap.error(f"--impls: unknown {bad}; known: {', '.join(IMPLS)}")
    args.gpus = [int(g) for g in args.gpus.split(",")]
    if not (args.out or args.dry_run or args.render or args.child or args.rank_of):
        ap.error("--out is required (or --dry-run, --render)")
    return args


def write_page(json_path: str) -> str:
    with open(json_path) as f:
        result = json.load(f)
    path = os.path.join(os.path.dirname(os.path.abspath(json_path)), "scaling.md")
    with open(path, "w") as f:
        f.write(page.render(result))
    return path


def main(argv=None) -> int:
    args = parse(argv)
    opts = {"steps": args.steps, "trials": args.trials, "sizes": args.sizes}
    if args.child:
        print(processes.MARK + json.dumps(processes.one_process(args.child, args.gpus, opts)))
        return 0
    if args.rank_of:
        row = processes.rank(args.rank_of, args.procs, opts)
        if row is not None:
            print(processes.MARK + json.dumps(row), flush=True)
        return 0
    if args.render:
        print(f"wrote {write_page(args.render)}")
        return 0
    for impl, how, n in plan(args):
        print(f"plan: {impl}, {how}" + (f", {n} GPUs" if n else f", {args.gpus} GPUs"))
    print(f"      {args.steps} steps per GPU per trial, best and median of {args.trials}")
    if args.dry_run:
        return 0
    from bench.report import nvidia_smi, versions, write_json
    rows, device = measure_all(args, opts)
    add_speedups(rows)
    result = dict(
        benchmark="scaling",
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        command=" ".join(["python3 -m bench.scaling.run"] + sys.argv[1:]),
        device=device, nvidia_smi=nvidia_smi(),
        versions=dict(python=platform.python_version(), **versions(
            ("jax", "jaxlib", "cutecall", "nvidia-cutlass-dsl", "quack-kernels",
             "flash-attn-4"))),
        steps_per_gpu=args.steps, trials=args.trials, rows=rows)
    write_json(args.out, result)
    print(f"wrote {write_page(args.out)}")
    print(page.table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
