"""The part ``first-step`` of ``bench/warm_start/run.py``: time to the first
training step of a job of N processes, one per GPU, four ways to start:

  alone        every process has an empty local tier and no remote tier:
               each compiles every kernel of the step itself
  distributed  an empty remote tier: every process calls
               ``cutecall.warmup(tasks, distributed=True)`` (the tasks split
               over the ranks, each kernel compiled once in the job), then
               runs the step; with ``--jax-cache`` (auto: when warm-jax is
               among the starts) JAX's compile cache beside the remote tier
               (``CUTECALL_CACHE_JAX=1``) fills too
  warm         the remote tier the distributed start filled, empty local
               tiers again, no warm-up: every kernel is a remote hit; XLA
               compiles the step again in every process
  warm-jax     as warm, with JAX's compile cache shared as well: XLA's
               executables of the step (and of the setup's small jits) load

The step: one attention layer (projections to q, k, v with GQA, causal
FlashAttention-4 through ``cutecall.attention``), then an MLP on QuACK's
GEMMs (``cutecall.quack.mlp``, tiles pinned as ``bench/scaling/steps.py``
pins them), a squared loss and an SGD update, data-parallel under
``jax.distributed`` and ``shard_map`` (batch split, weights replicated).

Per start: time to first step (from launching the processes until the
slowest has the step's result) and, per rank, its parts: imports (JAX,
``jax.distributed``, cutecall), setup (the data on the devices), trace +
lower (the step's kernels come from the store here: "kernels got" is the
time spent in cutecall's store, compiles included), XLA compile
(``lowered.compile()``: XLA, or a load from JAX's cache), first run (its
collective waits for the slowest rank, so rank skew lands here). Also
compiles, remote and local hits, JAX cache hits and writes (process 0
writes), and the warm-up's wait. The remote tier defaults to ``file://``
on local disk (a machine without redis-server); ``--remote redis`` starts a
redis-server here, ``--remote URL`` uses one. ``--out`` is rewritten after
every start, so a run cut off keeps the starts it finished.

    python -m bench.warm_start.run first-step --gpus 4 --out first_step.json --md first_step.md
    python -m bench.warm_start.run first-step --smoke --gpus 2     # CPU: orchestration only
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

from bench.harness import ROOT
from bench.warm_start.first_step_model import MODEL, SMOKE, problem, step, tasks


# -- one process of the job -----------------------------------------------------------
def instrument() -> dict:
    """Times every kernel the store hands out in this process, by how it
    came ("compiled", "remote", "disk"), and counts JAX's compile-cache
    events: {name: [count, seconds]}."""
    from jax import monitoring
    from cutecall._driver.store import lookup as store_kernels
    spent: dict = {}
    inner = store_kernels.load_or_compile

    def timed(*args, **kwargs):
        t = time.perf_counter()
        kernel, how = inner(*args, **kwargs)
        c = spent.setdefault(f"kernels_{how}", [0, 0.0])
        c[0], c[1] = c[0] + 1, c[1] + time.perf_counter() - t
        return kernel, how
    store_kernels.load_or_compile = timed

    def event(name, **kw):
        if name.startswith("/jax/compilation_cache/cache_"):
            c = spent.setdefault("jax_" + name.rsplit("/", 1)[1], [0, 0.0])
            c[0] += 1
    monitoring.register_event_listener(event)
    return spent


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
    import cutecall.jax     # CUTECALL_CACHE_JAX: JAX's cache beside the remote tier
    out = {"rank": rank, "imported_s": time.time() - t0,
           "jax_cache_dir": jax.config.jax_compilation_cache_dir}
    spent = instrument()
    m = SMOKE if smoke else MODEL
    if start == "distributed":
        report = cutecall.warmup(tasks(m, world, smoke), distributed=True, workers=workers)
        out.update(warmup_s=report.seconds, warmup_wait_s=report.wait_s,
                   job_compiles=report.compiles, loaded=report.loaded,
                   warmup_failed=[r.error for r in report.failed])
        if rank == 0:
            print(report, file=sys.stderr, flush=True)
    before = cutecall.compile_stats()["compiles"]
    in_warmup = {k: list(v) for k, v in spent.items()}
    out.update(first_step(m, world, smoke))
    out["first_step_s"] = time.time() - t0
    out.update(cutecall.compile_stats())
    out["step_compiles"] = out["compiles"] - before
    for k, (n, sec) in spent.items():   # the step's own: kernels got, JAX cache events
        n0, s0 = in_warmup.get(k, (0, 0.0))
        out[k] = n - n0
        if k.startswith("kernels_"):
            out[k + "_s"] = sec - s0
    out["kernels_s"] = sum(v for k, v in out.items()
                           if k.startswith("kernels_") and k.endswith("_s"))
    print("RESULT=" + json.dumps(out), flush=True)
    jax.distributed.shutdown()


def first_step(m: dict, world: int, smoke: bool) -> dict:
    """Runs the step once, data-parallel over the job's devices, timing its
    parts: setup_s (the data on the devices), lower_s (trace and lower: the
    kernels come from the store here), compile_s (XLA, or JAX's cache),
    run_s (the first execution). `smoke` (CPU): the cutecall step lowered
    for CUDA (its kernels), then a plain-XLA step compiled and run here."""
    import functools
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    t = time.perf_counter()
    mesh = jax.make_mesh((world,), ("b",), devices=jax.devices())
    w, x, y = jax.eval_shape(lambda k: problem(k, m), jax.random.key(0))
    args = (put_host_data(w, NamedSharding(mesh, P())), put_host_data(x, NamedSharding(mesh, P("b"))),
            put_host_data(y, NamedSharding(mesh, P("b"))))
    out = {"setup_s": time.perf_counter() - t}
    t = time.perf_counter()
    if smoke:
        w1, x1, y1 = problem(jax.random.key(0), dict(m, batch=m["batch"] // world))
        jax.jit(functools.partial(step, d=m["head_dim"], smoke=True)).trace(
            w1, x1, y1).lower(lowering_platforms=("cuda",))
    local = functools.partial(step, d=m["head_dim"], axis="b", plain=smoke)
    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P("b"), P("b")),
                              out_specs=P()))
    lowered = _profiled(lambda: f.trace(*args).lower())
    out["lower_s"], t = time.perf_counter() - t, time.perf_counter()
    compiled = lowered.compile()
    out["compile_s"], t = time.perf_counter() - t, time.perf_counter()
    w2 = jax.block_until_ready(compiled(*args))
    out["run_s"] = time.perf_counter() - t
    out["result"] = float(np.asarray(jax.tree.leaves(w2)[0].addressable_data(0)).ravel()[0])
    return out


def put_host_data(tree, sharding):
    """Arrays of `tree`'s shapes and dtypes on `sharding`, each process
    making only its own shards, on the host, as a data loader does: normal
    values from a generator seeded by the leaf and the shard's offset (the
    same data in every start, no device program in the setup)."""
    import zlib

    import jax
    import numpy as np

    def leaf(path, a):
        name = jax.tree_util.keystr(path)

        def shard(index):
            offset = [sl.start or 0 for sl in index]
            shape = [len(range(*sl.indices(n))) for sl, n in zip(index, a.shape)]
            rng = np.random.default_rng([zlib.crc32(name.encode()), *offset])
            return (rng.standard_normal(shape, np.float32) * scale).astype(a.dtype)
        # as problem(): q, k, v weights f32 * 0.05; the MLP's bf16 weights / sqrt(fan-in)
        scale = 0.05 if a.dtype == np.float32 else a.shape[-1] ** -0.5 if a.ndim == 2 else 1.0
        return jax.make_array_from_callback(a.shape, sharding, shard)
    return jax.tree_util.tree_map_with_path(leaf, tree)


def _profiled(fn):
    """fn(), under cProfile when FIRST_STEP_PROFILE names a file (rank 0):
    the 40 costliest calls by cumulative time and the 25 by own time go there, to tell where a
    warm start's trace and lowering spend their time."""
    path = os.environ.get("FIRST_STEP_PROFILE")
    if not path or os.environ.get("RANK", "0") != "0":
        return fn()
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    result = prof.runcall(fn)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    with open(path, "a") as f:
        f.write(f"== {' '.join(sys.argv[1:])}\n{text.getvalue()}")
    return result


# -- the starts ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PARTS = ("first_step_s", "imported_s", "kernels_s", "setup_s", "lower_s", "compile_s",
         "run_s")   # per start: the slowest rank's


def launch(start: str, args, cache: str, remote: str | None, jax_cache: bool,
           timeout: float) -> dict:
    """Starts `args.gpus` processes (fresh local tiers under `cache`; with
    `jax_cache`, JAX's compile cache beside the remote tier); their RESULT
    lines and the time to the slowest one's first step."""
    port, launched = free_port(), time.time()
    env = dict(os.environ, COORDINATOR=f"127.0.0.1:{port}", LAUNCHED_AT=str(launched))
    for name in ("CUTECALL_CACHE_REMOTE", "CUTECALL_CACHE_JAX", "JAX_COMPILATION_CACHE_DIR"):
        env.pop(name, None)
    if remote:
        env["CUTECALL_CACHE_REMOTE"] = remote
    if jax_cache:
        env["CUTECALL_CACHE_JAX"] = "1"
    if args.smoke:
        env.update(JAX_PLATFORMS="cpu", CUTECALL_ARCH=env.get("CUTECALL_ARCH", "sm_90a"))
    code = (f"from bench.warm_start import first_step; first_step.rank_main({start.split('-')[0]!r}, {args.gpus}, "
            f"{args.smoke!r}, {args.workers})")
    procs = [subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT,
        env=dict(env, RANK=str(r), CUTECALL_CACHE_DIR=os.path.join(cache, f"{start}-{r}")),
        stdout=subprocess.PIPE, stderr=None if r == 0 else subprocess.DEVNULL, text=True)
        for r in range(args.gpus)]
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, launched + timeout - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return {"start": start, "error": f"timed out after {timeout:.0f} s"}
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT=")]
        if p.returncode != 0 or not lines:
            return {"start": start, "error": f"a process exited {p.returncode}"}
        results.append(json.loads(lines[-1][len("RESULT="):]))
    sums = {k: sum(r[k] for r in results)
            for k in ("compiles", "step_compiles", "disk_hits", "remote_hits")}
    sums.update({k: sum(r.get(k, 0) for r in results)
                 for k in ("jax_cache_hits", "jax_cache_misses")})
    slowest = {k: round(max(r.get(k, 0.0) for r in results), 2) for k in PARTS}
    row = {"start": start, "jax_cache": jax_cache, **slowest, **sums, "ranks": results}
    if start == "distributed":
        row.update(warmup_wait_s=round(max(r["warmup_wait_s"] for r in results), 2),
                   job_compiles=results[0]["job_compiles"])
    return row


def markdown(rows: list, args, ratios: dict) -> str:
    import platform
    gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.split("\n")[0] \
        if shutil.which("nvidia-smi") else "no GPU (smoke)"
    lines = [f"## first_step.py, latest run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "", f"`python {' '.join(sys.argv)}` on {args.gpus} x {gpus}, {os.cpu_count()} "
             f"CPU cores; Python {platform.python_version()}; remote `{args.remote}`.", "",
             "| start | JAX cache | time to first step (s) | imports | kernels got | setup "
             "| trace + lower | XLA compile | first run | compiles (in the step) | remote hits "
             "| local hits | JAX cache hits / writes | warm-up wait (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['start']} | | error: {r['error']} |" + " |" * 11)
            continue
        lines.append(
            f"| {r['start']} | {'shared' if r['jax_cache'] else 'off'} | {r['first_step_s']} | "
            + " | ".join(str(r[k]) for k in PARTS[1:]) +
            f" | {r['compiles']} ({r['step_compiles']}) | {r['remote_hits']} | "
            f"{r['disk_hits']} | {r['jax_cache_hits']} / {r['jax_cache_misses']} | "
            f"{r.get('warmup_wait_s', '')} |")
    lines.append("")
    lines += [f"alone / {k}: {v:.1f}x" for k, v in ratios.items()]
    lines.append("(the target is at least 10x; columns after the time to first step are "
                 "the slowest rank's seconds; \"kernels got\" is the time in cutecall's store "
                 "inside the step, compiles included.)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.warm_start.run first-step",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=4, help="processes, one per GPU")
    ap.add_argument("--remote", default="file", help="file (default: a directory here), "
                    "redis (a redis-server started here), or a URL")
    ap.add_argument("--workers", type=int, default=1,
                    help="warm-up workers per process (1: in the process)")
    ap.add_argument("--timeout", type=float, default=540, help="seconds per start")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for all starts: a start gets what is left, none once spent")
    ap.add_argument("--starts", default="alone,distributed,warm,warm-jax",
                    help="of alone, distributed, warm, warm-jax (warm with JAX's cache)")
    ap.add_argument("--jax-cache", choices=("auto", "on", "off"), default="auto",
                    help="JAX's compile cache beside the remote tier in the distributed start "
                         "(auto: on when warm-jax follows); always on in warm-jax")
    ap.add_argument("--smoke", action="store_true",
                    help="CPU: the kernels lowered for CUDA, a plain-XLA step compiled and run")
    ap.add_argument("--out")
    ap.add_argument("--md", help="append a section to this markdown file")
    args = ap.parse_args(argv)
    starts = args.starts.split(",")
    unknown = set(starts) - {"alone", "distributed", "warm", "warm-jax"}
    if unknown:
        ap.error(f"--starts: unknown {sorted(unknown)}")
    fill = args.jax_cache == "on" or (args.jax_cache == "auto" and "warm-jax" in starts)
    deadline = time.time() + (args.budget or 1e9)
    work = tempfile.mkdtemp(prefix="cutecall-first-step-")
    server, remote = None, args.remote
    if args.remote == "file":
        remote = f"file://{work}/remote"
    elif args.remote == "redis":
        from bench.warm_start.cluster import start_redis
        server, remote = start_redis(work)
    rows, ratios = [], {}
    try:
        for start in starts:
            left = min(args.timeout, deadline - time.time())
            if left < 5:
                rows.append({"start": start, "error": "skipped: --budget spent"})
                continue
            row = launch(start, args, os.path.join(work, "hosts"),
                         None if start == "alone" else remote,
                         start == "warm-jax" or (start == "distributed" and fill), left)
            print(json.dumps({k: v for k, v in row.items() if k != "ranks"}), flush=True)
            rows.append(row)
            by = {r["start"]: r for r in rows if "error" not in r}
            ratios = {k: by["alone"]["first_step_s"] / by[k]["first_step_s"]
                      for k in ("warm", "warm-jax") if "alone" in by and k in by}
            if args.out:    # after every start: a cut-off run keeps what it has
                with open(args.out, "w") as f:
                    json.dump({"rows": rows, "alone_over_warm": ratios.get("warm"),
                               "alone_over": ratios}, f, indent=2)
    finally:
        if server is not None:
            server.terminate()
        shutil.rmtree(work, ignore_errors=True)
    text = markdown(rows, args, ratios)
    print(text)
    if args.md:
        with open(args.md, "a") as f:
            f.write("\n" + text)

