"""Where the scaling benchmark's steps run: every measurement in child
processes of ``bench/scaling/run.py`` (the parent imports no JAX and holds
no GPU memory), started as ``python -m bench.scaling.run`` with a hidden
option:

  one process  ``--child IMPL``: the step on 1, 2 and 4 of the visible GPUs
               in one process (``jit`` on one GPU, ``shard_map`` over the
               batch on more), one row per count
  N processes  ``--rank-of IMPL --procs N``: one process per GPU
               (``jax.distributed``, a global mesh, the same ``shard_map``);
               rank 0's timing is the row

Each child prints its result as one ``RESULT=`` JSON line.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

from bench.harness import ROOT, module_command
from bench.scaling import loop, steps

CUTECALL_IMPLS = ("fa4_cutecall", "mlp_quack")
MARK = "RESULT="


def measure(step, args, impl: str, n: int, opts: dict) -> dict:
    """The row fields of `step` on `args` at `n` GPUs: ``opts["steps"]``
    steps per GPU per trial (each trial the same global batches at every
    count, so as long under the GPUs' power cap), ``opts["trials"]``."""
    m = loop.loop_us(step, args, steps=opts["steps"] * n, trials=opts["trials"],
                     executes=loop.cutecall_executes if impl in CUTECALL_IMPLS else None)
    row = {"us_per_step": m["us"], "us_per_step_median": m["median_us"],
           "trials_us": m["trials_us"], "steps_per_trial": opts["steps"] * n,
           "compile_s": m["compile_s"]}
    if "executes_per_step" in m:
        row["executes_per_step"] = m["executes_per_step"]
    return row


def one_process(impl: str, counts: list[int], opts: dict) -> dict:
    """In a ``--child`` process: a row per GPU count (of those visible)."""
    import jax
    devices = jax.devices()
    rows = []
    for n in (n for n in counts if n <= len(devices)):
        row = {"impl": impl, "gpus": n, "processes": 1}
        t0 = time.perf_counter()
        try:
            step, args = steps.on_devices(steps.case(impl, opts.get("sizes")), devices[:n])
            row.update(measure(step, args, impl, n, opts))
        except Exception as e:  # noqa: BLE001  one failing row must not lose the others
            row["error"] = f"{type(e).__name__}: {e}"[:2000]
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "trials_us"}), flush=True)
    return {"device": f"{len(devices)} x {devices[0].device_kind}", "rows": rows}


def rank(impl: str, world: int, opts: dict) -> dict | None:
    """In a ``--rank-of`` process (RANK, COORDINATOR from the environment):
    the step over `world` processes of one GPU each; rank 0's row."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    r = int(os.environ["RANK"])
    if os.environ.get("JAX_PLATFORMS") == "cpu":  # a smoke test: one CPU device each
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(os.environ["COORDINATOR"], world, r)
    else:
        jax.distributed.initialize(os.environ["COORDINATOR"], world, r, local_device_ids=[r])
    c = steps.case(impl, opts.get("sizes"))
    mesh = jax.make_mesh((world,), ("b",), devices=jax.devices())

    def put(a, spec):
        a = np.asarray(a)
        return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec),
                                            lambda i: a[i])
    w, x, y = c.problem(jax.random.key(0))
    args = (jax.tree.map(lambda a: put(a, P()), w), put(x, P("b")), put(y, P("b")))
    row = {"impl": impl, "gpus": world, "processes": world}
    row.update(measure(steps.sharded(c, mesh), args, impl, world, opts))
    jax.distributed.shutdown()
    return row if r == 0 else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _options(opts: dict) -> list[str]:
    out = ["--steps", str(opts["steps"]), "--trials", str(opts["trials"])]
    return out + (["--sizes", json.dumps(opts["sizes"])] if opts.get("sizes") else [])


def _result(proc: subprocess.Popen, out: str) -> dict:
    lines = [ln for ln in out.splitlines() if ln.startswith(MARK)]
    if not lines:
        tail = " | ".join(out.strip().splitlines()[-4:])
        return {"error": f"exited {proc.returncode} without a result: {tail}"[:2000]}
    return json.loads(lines[-1][len(MARK):])


def launch_one_process(impl: str, counts: list[int], opts: dict, timeout: float) -> dict:
    """{"device", "rows"} from a ``--child`` process, or {"error"}."""
    cmd = module_command("bench.scaling.run", "--child", impl,
                         "--gpus", ",".join(map(str, counts)), *_options(opts))
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return {"error": f"timed out after {timeout:.0f} s"}
    return _result(proc, out)


def launch_ranks(impl: str, world: int, opts: dict, timeout: float) -> dict:
    """Rank 0's row of `world` ``--rank-of`` processes, or {"error"}."""
    port = _free_port()
    cmd = module_command("bench.scaling.run", "--rank-of", impl, "--procs", str(world),
                         *_options(opts))
    env = dict(os.environ, COORDINATOR=f"127.0.0.1:{port}")
    # one device per process (a CPU smoke test forces several per process)
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                                if "force_host_platform_device_count" not in f)
    procs = [subprocess.Popen(cmd, cwd=ROOT, text=True, env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL)
             for r in range(world)]
    t0 = time.time()
    try:
        out, _ = procs[0].communicate(timeout=timeout)
        for p in procs[1:]:
            p.wait(timeout=max(5, timeout - (time.time() - t0)))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        return {"error": f"timed out after {timeout:.0f} s"}
    return _result(procs[0], out)
