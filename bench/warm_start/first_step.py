#!/usr/bin/env python3
"""Time to the first training step of a job of N processes, one per GPU
(issue 36), three ways to start:

  alone        every process has an empty local tier and no remote tier:
               each compiles every kernel of the step itself
  distributed  an empty remote tier: every process calls
               ``cutecall.warmup(tasks, distributed=True)`` (the tasks split
               over the ranks, each kernel compiled once in the job), then
               runs the step
  warm         the remote tier the distributed start filled, empty local
               tiers again, no warm-up: every kernel is a remote hit

The step: one attention layer (projections to q, k, v with GQA, causal
FlashAttention-4 through ``cutecall.attention``), then an MLP on QuACK's
GEMMs (``cutecall.quack.mlp``, tiles pinned as ``bench/scaling/steps.py``
pins them), a squared loss and an SGD update, data-parallel under
``jax.distributed`` and ``shard_map`` (batch split, weights replicated).

Per start: time to first step (from launching the processes until the
slowest has the step's result), the processes' compiles, remote and local
hits, and the warm-up's wait. The remote tier defaults to ``file://`` on
local disk (a machine without redis-server); ``--remote redis`` starts a
redis-server here, ``--remote URL`` uses one.

    python bench/warm_start/first_step.py --gpus 4 --out first_step.json \\
        --md bench/results/warm_start.md
    python bench/warm_start/first_step.py --smoke --gpus 2     # CPU: orchestration only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = dict(batch=16, seqlen=2048, heads=16, heads_kv=4, head_dim=128, embed=2048,
             hidden=5504)
SMOKE = dict(batch=4, seqlen=8, heads=2, heads_kv=2, head_dim=16, embed=32, hidden=64)


# -- the model --------------------------------------------------------------------
def problem(key, m: dict):
    """(w, x, y) at global batch m["batch"]: x (B, S, E), y (B, S, H * D)."""
    import jax
    import jax.numpy as jnp
    from cutecall.attention import training as at
    w, x, _ = at.problem(key, **{k: m[k] for k in ("batch", "seqlen", "heads", "heads_kv",
                                                   "head_dim", "embed")})
    d, h, bf16 = m["heads"] * m["head_dim"], m["hidden"], jnp.bfloat16
    k1, k2, ky = jax.random.split(jax.random.fold_in(key, 1), 3)
    w = dict(w, w1=(jax.random.normal(k1, (h, d)) / d ** 0.5).astype(bf16),
             w2=(jax.random.normal(k2, (d, h)) / h ** 0.5).astype(bf16))
    return w, x, jax.random.normal(ky, x.shape[:2] + (d,)).astype(bf16)


def attend(w, x, d: int):
    from cutecall.attention import attention

    def proj(name):
        return (x @ w[name].astype(x.dtype)).reshape(x.shape[:2] + (-1, d))
    o = attention(proj("q"), proj("k"), proj("v"), causal=True)
    return o.reshape(x.shape[:2] + (-1,))


def feed(w, h):
    if os.path.join(os.path.dirname(HERE), "scaling") not in sys.path:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scaling"))
    from steps import ACTIVATION, pinned_tiles
    from cutecall.quack import mlp as qm
    return qm.mlp(h, w["w1"], w["w2"], ACTIVATION, tile=pinned_tiles())


def loss(w, x, y, d: int, smoke: bool = False):
    import jax.numpy as jnp
    if smoke:  # a cheap cutecall kernel in place of FA4 and QuACK (CPU runs)
        import cutecall
        from cutecall.examples import kernels
        h = (x @ w["q"].astype(x.dtype)).astype(jnp.float32)
        out = cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=lambda a, b: a,
                                    alpha=2.0, relu=True)(h.reshape(-1, h.shape[-1]),
                                                          jnp.zeros(h.shape[-1], jnp.float32))
        return jnp.mean(out)
    out = feed(w, attend(w, x, d))
    return jnp.mean((out.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)


def step(w, x, y, d: int, smoke: bool = False, axis: str | None = None, lr: float = 0.1):
    """One SGD step (`smoke`: the loss alone, its stand-in kernel has no
    gradient)."""
    import jax
    if smoke:
        return loss(w, x, y, d, smoke=True)

    def f(w):
        value = loss(w, x, y, d, smoke)
        return jax.lax.pmean(value, axis) if axis else value
    g = jax.grad(f)(w)
    return jax.tree.map(lambda p, g: (p - lr * g).astype(p.dtype), w, g)


# Warm-up tasks (module level, so a fork server's workers can import them):
# the attention and the MLP, forward and gradient, at one process's shapes;
# the whole step last. Kernels two tasks share are compiled once (leases).
def attention_fwd(w, x, y, d):
    return attend(w, x, d)


def attention_grad(w, x, y, d):
    import jax
    return jax.grad(lambda w: attend(w, x, d).astype("float32").sum())(w)


def mlp_fwd(w, x, y, d):
    return feed(w, y)


def mlp_grad(w, x, y, d):
    import jax
    return jax.grad(lambda w: feed(w, y).astype("float32").sum())(w)


def tasks(m: dict, world: int, smoke: bool) -> list:
    import functools
    import jax
    import cutecall
    w, x, y = jax.eval_shape(lambda k: problem(k, dict(m, batch=m["batch"] // world)),
                             jax.random.key(0))
    d = m["head_dim"]
    parts = [] if smoke else [attention_grad, mlp_grad, attention_fwd, mlp_fwd]
    # smoke: step is the loss alone (see step)
    return [cutecall.jax_warmup_task(functools.partial(f, d=d), w, x, y) for f in parts] + \
        [cutecall.jax_warmup_task(functools.partial(step, d=d, smoke=smoke), w, x, y)]


# -- one process of the job -----------------------------------------------------------
def rank_main(start: str, world: int, smoke: bool, workers: int) -> None:
    t0 = float(os.environ["LAUNCHED_AT"])
    rank = int(os.environ["RANK"])
    import jax
    if smoke:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(os.environ["COORDINATOR"], world, rank)
    else:
        jax.distributed.initialize(os.environ["COORDINATOR"], world, rank,
                                   local_device_ids=[rank])
    import cutecall
    out = {"rank": rank, "imported_s": time.time() - t0}
    m = SMOKE if smoke else MODEL
    if start == "distributed":
        report = cutecall.warmup(tasks(m, world, smoke), distributed=True, workers=workers)
        out.update(warmup_s=report.seconds, warmup_wait_s=report.wait_s,
                   job_compiles=report.compiles, loaded=report.loaded,
                   warmup_failed=[r.error for r in report.failed])
        if rank == 0:
            print(report, file=sys.stderr, flush=True)
    before = cutecall.compile_stats()["compiles"]
    out["result"] = first_step(m, world, smoke)
    out["first_step_s"] = time.time() - t0
    out.update(cutecall.compile_stats())
    out["step_compiles"] = out["compiles"] - before
    print("RESULT=" + json.dumps(out), flush=True)
    jax.distributed.shutdown()


def first_step(m: dict, world: int, smoke: bool) -> float:
    """Runs (on CPU, `smoke`: lowers for CUDA) the step once; its loss input."""
    import functools
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    if smoke:
        w, x, y = problem(jax.random.key(0), dict(m, batch=m["batch"] // world))
        jax.jit(functools.partial(step, d=m["head_dim"], smoke=True)).trace(
            w, x, y).lower(lowering_platforms=("cuda",))
        return 0.0
    mesh = jax.make_mesh((world,), ("b",), devices=jax.devices())
    w, x, y = problem(jax.random.key(0), m)

    def put(a, spec):
        a = np.asarray(a)
        return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec),
                                            lambda i: a[i])
    args = (jax.tree.map(lambda a: put(a, P()), w), put(x, P("b")), put(y, P("b")))
    local = functools.partial(step, d=m["head_dim"], axis="b")
    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P("b"), P("b")),
                              out_specs=P()))
    w1 = jax.block_until_ready(f(*args))
    return float(np.asarray(jax.tree.leaves(w1)[0].addressable_data(0)).ravel()[0])


# -- the three starts -------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(start: str, args, cache: str, remote: str | None) -> dict:
    """Starts `args.gpus` processes (fresh local tiers under `cache`); their
    RESULT lines and the time to the slowest one's first step."""
    port, launched = free_port(), time.time()
    env = dict(os.environ, COORDINATOR=f"127.0.0.1:{port}", LAUNCHED_AT=str(launched),
               PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    env.pop("CUTECALL_CACHE_REMOTE", None)
    if remote:
        env["CUTECALL_CACHE_REMOTE"] = remote
    if args.smoke:
        env.update(JAX_PLATFORMS="cpu", CUTECALL_ARCH=env.get("CUTECALL_ARCH", "sm_90a"))
    code = (f"import first_step; first_step.rank_main({start!r}, {args.gpus}, "
            f"{args.smoke!r}, {args.workers})")
    procs = [subprocess.Popen(
        [sys.executable, "-c", code],
        env=dict(env, RANK=str(r), CUTECALL_CACHE_DIR=os.path.join(cache, f"{start}-{r}")),
        stdout=subprocess.PIPE, stderr=None if r == 0 else subprocess.DEVNULL, text=True)
        for r in range(args.gpus)]
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return {"start": start, "error": f"timed out after {args.timeout} s"}
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT=")]
        if p.returncode != 0 or not lines:
            return {"start": start, "error": f"a process exited {p.returncode}"}
        results.append(json.loads(lines[-1][len("RESULT="):]))
    sums = {k: sum(r[k] for r in results)
            for k in ("compiles", "step_compiles", "disk_hits", "remote_hits")}
    row = {"start": start, "first_step_s": round(max(r["first_step_s"] for r in results), 2),
           "imported_s": round(max(r["imported_s"] for r in results), 2), **sums,
           "ranks": results}
    if start == "distributed":
        row.update(warmup_wait_s=round(max(r["warmup_wait_s"] for r in results), 2),
                   job_compiles=results[0]["job_compiles"])
    return row


def markdown(rows: list, args, ratio) -> str:
    import platform
    gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.split("\n")[0] \
        if shutil.which("nvidia-smi") else "no GPU (smoke)"
    lines = [f"## first_step.py, latest run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "", f"`python {' '.join(sys.argv)}` on {args.gpus} x {gpus}, {os.cpu_count()} "
             f"CPU cores; Python {platform.python_version()}; remote `{args.remote}`.", "",
             "| start | time to first step (s) | imports (s) | compiles (in the step) "
             "| remote hits | local hits | warm-up wait (s) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['start']} | error: {r['error']} | | | | | |")
            continue
        lines.append(f"| {r['start']} | {r['first_step_s']} | {r['imported_s']} | "
                     f"{r['compiles']} ({r['step_compiles']}) | {r['remote_hits']} | "
                     f"{r['disk_hits']} | {r.get('warmup_wait_s', '')} |")
    if ratio:
        lines += ["", f"alone / warm: {ratio:.1f}x (issue 36 asks for at least 10x)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=4, help="processes, one per GPU")
    ap.add_argument("--remote", default="file", help="file (default: a directory here), "
                    "redis (a redis-server started here), or a URL")
    ap.add_argument("--workers", type=int, default=1,
                    help="warm-up workers per process (1: in the process)")
    ap.add_argument("--timeout", type=float, default=540, help="seconds per start")
    ap.add_argument("--starts", default="alone,distributed,warm")
    ap.add_argument("--smoke", action="store_true",
                    help="CPU: a cheap kernel in place of the step, lowered, not run")
    ap.add_argument("--out")
    ap.add_argument("--md", help="append a section to this markdown file")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cutecall-first-step-")
    server, remote = None, args.remote
    if args.remote == "file":
        remote = f"file://{work}/remote"
    elif args.remote == "redis":
        from cluster import start_redis
        server, remote = start_redis(work)
    rows = []
    try:
        for start in args.starts.split(","):
            row = launch(start, args, os.path.join(work, "hosts"),
                         None if start == "alone" else remote)
            print(json.dumps({k: v for k, v in row.items() if k != "ranks"}), flush=True)
            rows.append(row)
    finally:
        if server is not None:
            server.terminate()
        shutil.rmtree(work, ignore_errors=True)
    by = {r["start"]: r for r in rows if "error" not in r}
    ratio = by["alone"]["first_step_s"] / by["warm"]["first_step_s"] \
        if "alone" in by and "warm" in by else None
    text = markdown(rows, args, ratio)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "alone_over_warm": ratio}, f, indent=2)
    if args.md:
        with open(args.md, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
