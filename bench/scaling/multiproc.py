#!/usr/bin/env python3
"""The scaling steps with one process per GPU (jax.distributed, a global
mesh, shard_map), timed like bench/scaling/run.py, added as rows with
``processes`` = N to its JSON and page. Against run.py's one-process rows
it separates costs shared by the device threads of one process (locks,
driver work while XLA records graphs) from the step's own.

  python bench/scaling/multiproc.py --json scaling.json [--impls fa4_cutecall,fa4_cudnn] [--procs 4]

Rank 0 measures (every rank runs the same executions); its rows land in
--json (speedup against that file's 1-GPU row of the impl), the page is
re-rendered next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def rank_main(impl: str, world: int, sizes: dict | None, loop_steps: int = 20) -> int:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    import chains
    import steps
    rank = int(os.environ["RANK"])
    if os.environ.get("JAX_PLATFORMS") == "cpu":  # a smoke test: one CPU device each
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(os.environ["COORDINATOR"], world, rank)
    else:
        jax.distributed.initialize(os.environ["COORDINATOR"], world, rank,
                                   local_device_ids=[rank])
    c = steps.case(impl, sizes)
    mesh = jax.make_mesh((world,), ("b",), devices=jax.devices())

    def put(a, spec):
        a = np.asarray(a)
        return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec),
                                            lambda i: a[i])
    w, x, y = c.problem(jax.random.key(0))
    args = (jax.tree.map(lambda a: put(a, P()), w), put(x, P("b")), put(y, P("b")))
    m = chains.measure(steps.sharded(c, mesh), args, feed=False, loop_steps=loop_steps,
                       executes=chains.cutecall_executes
                       if impl in ("fa4_cutecall", "mlp_quack") else None)
    if rank == 0:
        print("RESULT=" + json.dumps(m), flush=True)
    jax.distributed.shutdown()
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(impl: str, world: int, timeout: float, sizes: str | None,
           loop_steps: int = 20) -> dict:
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--rank-of", impl, "--procs", str(world),
         "--loop-steps", str(loop_steps)] + (["--sizes", sizes] if sizes else []),
        env=dict(os.environ, RANK=str(r), COORDINATOR=f"127.0.0.1:{port}"),
        stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL, text=True)
        for r in range(world)]
    t0 = time.time()
    try:
        out, _ = procs[0].communicate(timeout=timeout)
        for p in procs[1:]:
            p.wait(timeout=max(5, timeout - (time.time() - t0)))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        return {"error": f"timed out after {timeout} s"}
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT=")]
    if not lines:
        return {"error": f"rank 0 exited {procs[0].returncode} without a result"}
    return json.loads(lines[-1][len("RESULT="):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="run.py's scaling.json: rows are added")
    ap.add_argument("--impls", default="fa4_cutecall,fa4_cudnn")
    ap.add_argument("--procs", default="4", help="process counts")
    ap.add_argument("--timeout", type=float, default=150, help="seconds per launch")
    ap.add_argument("--sizes", help="JSON overriding the impl's sizes (smoke tests)")
    ap.add_argument("--equal-work", action="store_true",
                    help="20 steps times the process count per trial, not 20 "
                         "(suite.py --equal-work)")
    ap.add_argument("--loop-steps", type=int, default=20, help=argparse.SUPPRESS)
    ap.add_argument("--rank-of", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_of:
        return rank_main(args.rank_of, int(args.procs),
                         json.loads(args.sizes) if args.sizes else None, args.loop_steps)
    if not args.json:
        ap.error("--json is required")
    import page
    import suite
    result = json.load(open(args.json))
    for world in (int(p) for p in args.procs.split(",")):
        for impl in args.impls.split(","):
            m = launch(impl, world, args.timeout, args.sizes,
                       20 * world if args.equal_work else 20)
            row = {"impl": impl, "gpus": world, "processes": world}
            if "error" in m:
                row["error"] = m["error"]
            else:
                row.update(us_per_step=m["loop_us"], trials_us=m["loop_all"],
                           chain_cold_us_per_step=m["cold_us"],
                           chain_alt_us_per_step=m["alt_us"],
                           chain_steady_us_per_step=m["warm_us"],
                           **{k: v for k, v in m.items() if k.startswith("executes")})
                row["us_per_step_median"] = m["loop_median_us"]
            result["rows"].append(row)
            suite.add_speedups(result["rows"])  # against the file's 1-GPU rows
            print(json.dumps(row), flush=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(os.path.dirname(os.path.abspath(args.json)), "scaling.md"), "w") as f:
        f.write(page.render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
