#!/usr/bin/env python3
"""Issue 35's scaling run in one budget: data-parallel training steps at 1,
2 and 4 GPUs of one process, command buffers on (XLA's default), timed as a
loop of donated steps, the children of a plan (bench/scaling/plans.py) in
priority order:

  table  (default) the table: cutecall's FA4 step, the same step on XLA's
         cuDNN attention, QuACK's MLP through cutecall and the same MLP on
         XLA's dot (bench/scaling/steps.py), each traced at 1 and 4 GPUs for
         a per-kernel breakdown (bench/scaling/breakdown.py); then variants
         (bench/scaling/variants.py), cutecall first: per-tensor all-reduces
         with the latency-hiding scheduler (+overlap), a four-layer model
         (_L4) without and with it, the gradient all-reduced in float32
         (+f32grad; JAX's own is bfloat16 here), each at 1, 4 and 2 GPUs
  flags  the MLP steps traced, then XLA options against the 4-GPU loss:
         DotMerger off (+nomerge), +tuned, command buffers without
         collectives (+nocollcb)

Every row records its optimized HLO's collectives (count, bytes, dtypes) and
its concatenate/slice/copy fusions and custom calls; each 4-GPU row's HLO
text is kept (work/hlo-IMPL-4.txt in the logs).

Each step runs in its own child process (bench/scaling/suite_child.py; XLA
options per compile), all sharing the artifact store (CUTECALL_CACHE_DIR,
default ~/.cache/cutecall) so FA4 and QuACK kernels compile once. A child's
configuration that would start past the budget is skipped and recorded; a
child past it is killed (its finished rows stay).

  python bench/scaling/suite.py --out $OUT/scaling --budget 390
  python bench/scaling/suite.py --dry-run                 # the plan
  python bench/scaling/suite.py --plan flags --only table-mlp_xla,flags-fa4_cutecall --dry-run
  python bench/scaling/suite.py --out /tmp/s --cpu-smoke  # 4 CPU devices, tiny shapes

Writes OUT/scaling.json (rows {impl, gpus, processes, us_per_step, speedup},
the breakdowns, what was skipped), OUT/scaling.md (bench/scaling/page.py),
OUT/logs.tar.gz (each child's log and spec; the kept traces).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import page  # noqa: E402
import plans  # noqa: E402

SMOKE_SIZES = {"fa4": dict(batch=4, seqlen=64, heads=4, heads_kv=2, head_dim=16, embed=64),
               "mlp": dict(tokens=256, d=64, hidden=128)}


GROUPS: list[int] = []  # process groups this run started and has not reaped


def stop(signum, frame):
    """SIGTERM (device_run.sh's cap): the children's groups go too (they run
    in sessions of their own, out of reach of `timeout`)."""
    for pid in GROUPS:
        kill_group(pid)
    # the pipe to tee dies with the shell: what is printed from here on is lost
    sys.stdout = sys.stderr = open(os.devnull, "w")
    raise SystemExit(f"suite: signal {signum}")


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # gone already
        pass


def run_child(child: dict, args, deadline: float, work: str, warm_pid=None) -> dict:
    """Runs one child until it ends or `deadline` (+15 s grace; its max_s
    from now, if sooner); returns {"name", "rc", "seconds"}. Its rows land
    in work/rows-NAME.jsonl."""
    deadline = min(deadline, time.time() + child.get("max_s", float("inf")))
    spec = dict(child, rows=os.path.join(work, f"rows-{child['name']}.jsonl"),
                traces=os.path.join(work, "traces"), deadline=deadline,
                stub=args.cpu_smoke, sizes=SMOKE_SIZES if args.cpu_smoke else
                {"mlp": {"tokens": args.mlp_tokens}},
                steps=args.steps, trials=args.trials, trace_steps=args.trace_steps,
                equal_work=args.equal_work,
                warm_pid=warm_pid)
    spec_path = os.path.join(work, f"spec-{child['name']}.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    t0 = time.time()
    with open(os.path.join(work, f"{child['name']}.log"), "w") as log:
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "suite_child.py"), spec_path],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        GROUPS.append(p.pid)
        try:
            rc = p.wait(timeout=max(5.0, deadline + 15 - time.time()))
        except subprocess.TimeoutExpired:
            kill_group(p.pid)  # the child's own group (it started ptxas...)
            p.wait()
            rc = "killed at the budget"
    GROUPS.remove(p.pid)
    return {"name": child["name"], "rc": rc, "seconds": round(time.time() - t0, 1)}


def start_warm(args, work: str):
    """The QuACK GEMMs' background compile (suite_child.py --warm-quack):
    niced, no GPU, its log in work/warm-quack.log; None in CPU smoke runs."""
    if args.cpu_smoke or args.no_warm:
        return None
    log = open(os.path.join(work, "warm-quack.log"), "w")
    return subprocess.Popen(
        ["nice", "-n", "19", sys.executable, os.path.join(HERE, "suite_child.py"),
         "--warm-quack", json.dumps({"tokens": args.mlp_tokens})],
        env=dict(os.environ, JAX_PLATFORMS="cpu"), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)


def collect(child: dict, work: str) -> tuple[list, list, dict]:
    """(rows, skipped, meta) of a child: the configurations it never
    reached count as skipped."""
    rows, skipped, meta, seen = [], [], {}, set()
    path = os.path.join(work, f"rows-{child['name']}.jsonl")
    lines = open(path).read().splitlines() if os.path.exists(path) else []
    for ln in lines:
        r = json.loads(ln)
        if "meta" in r:
            meta = r["meta"]
            continue
        seen.add((r["model"], r["grads"], r["xla"], r["gpus"]))
        (skipped if "skipped" in r else rows).append(r)
    import variants
    for c in child["configs"]:
        if (c["model"], c["grads"], c["xla"], c["gpus"]) not in seen:
            skipped.append({"impl": variants.name(child["impl"], c["model"], c["grads"],
                                                  c["xla"]), "gpus": c["gpus"],
                            "skipped": "not reached (child ended or was killed)"})
    return rows, skipped, meta


def add_speedups(rows) -> None:
    """speedup (best trials) and, where rows carry it, speedup_median (the
    median trials): the 1-GPU row's time over the row's; target 0.95·N."""
    one = {r["impl"]: r for r in rows
           if r["gpus"] == 1 and r.get("processes", 1) == 1 and "us_per_step" in r}
    for r in rows:
        base = one.get(r["impl"])
        if "us_per_step" in r and base:
            r["speedup"] = round(base["us_per_step"] / r["us_per_step"], 3)
            r["target"] = round(0.95 * r["gpus"], 2)
            if "us_per_step_median" in r and "us_per_step_median" in base:
                r["speedup_median"] = round(
                    base["us_per_step_median"] / r["us_per_step_median"], 3)


def environment(args) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if args.cpu_smoke:
        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=(env.get("XLA_FLAGS", "") +
                   " --xla_force_host_platform_device_count=4").strip())
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for scaling.json, scaling.md, logs.tar.gz")
    ap.add_argument("--budget", type=float, default=390, help="seconds for everything")
    ap.add_argument("--plan", default="table", choices=sorted(plans.PLANS),
                    help="which children (bench/scaling/plans.py)")
    ap.add_argument("--only", help="comma-separated child names (see --dry-run)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--equal-work", action="store_true",
                    help="--steps times the GPU count per trial: the same global batches, "
                         "so the same time under the power cap, at every GPU count")
    ap.add_argument("--trace-steps", type=int, default=5)
    ap.add_argument("--mlp-tokens", type=int, default=32768,
                    help="the MLP step's global batch of tokens (d 4096, hidden 11008)")
    ap.add_argument("--no-warm", action="store_true",
                    help="no background compile of the QuACK GEMMs")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="4 CPU devices, tiny shapes, XLA attention and dot for every impl")
    ap.add_argument("--max-gpus", type=int, default=4,
                    help="the host's GPUs: rows above it are dropped (2: a 2-GPU host)")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    children = [c for c in plans.plan(args.plan, args.max_gpus)
                if not args.only or c["name"] in args.only.split(",")]
    if args.only and len(children) != len(set(args.only.split(","))):
        ap.error(f"--only {args.only!r}: plan {args.plan!r} has "
                 + ",".join(c["name"] for c in plans.plan(args.plan)))
    for c in children:
        print(f"plan: {c['name']}" + (f" (XLA_FLAGS+={c['xla_flags']})" if c.get("xla_flags")
                                      else "") + ": " + ", ".join(
            f"{c['impl']}:{x['model']}/{x['grads']}/{x['xla']}@{x['gpus']}"
            + ("+trace" if x["trace"] else "") for x in c["configs"]))
    if args.dry_run:
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run)")
    work = os.path.join(args.out, "work")
    os.makedirs(os.path.join(work, "traces"), exist_ok=True)
    os.environ.update(environment(args))
    deadline = t0 + args.budget - 20  # 20 s to collect and write
    signal.signal(signal.SIGTERM, stop)
    warm = start_warm(args, work) if any(c["impl"] == "mlp_quack" for c in children) else None
    if warm is not None:
        GROUPS.append(warm.pid)
    rows, skipped, metas, runs = [], [], [], []
    stopped = None
    for c in children:
        if stopped or deadline - time.time() < (5 if args.cpu_smoke else 30):
            runs.append({"name": c["name"], "rc": stopped or "skipped: budget spent"})
        else:
            try:
                runs.append(run_child(c, args, deadline, work, warm and warm.pid))
            except SystemExit as e:  # the cap's SIGTERM: write what was measured
                stopped = str(e)
                runs.append({"name": c["name"], "rc": stopped})
        r, s, m = collect(c, work)
        rows += r
        skipped += s
        metas.append(m)
        print(f"== [{time.time() - t0:4.0f} s] {runs[-1]}: {len(r)} rows, {len(s)} skipped",
              flush=True)
        for row in r:
            print("   " + page.row_line(row), flush=True)
    if warm is not None and warm.poll() is None:
        kill_group(warm.pid)  # still compiling at the end: not needed now
        warm.wait()
    add_speedups(rows)
    write(args, rows, skipped, metas, runs, t0, work, traces=not stopped)
    return 0 if not stopped else 1


def write(args, rows, skipped, metas, runs, t0, work, traces: bool = True) -> None:
    """scaling.json, scaling.md, logs.tar.gz (the traces only with `traces`:
    a run stopped by the cap has seconds left)."""
    from report import nvidia_smi, versions, write_json
    meta = next((m for m in metas if m), {})
    breakdowns = [{k: r[k] for k in ("impl", "gpus", "us_per_step", "breakdown") if k in r}
                  for r in rows if "breakdown" in r]
    result = dict(
        benchmark="scaling", suite=True,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        command=" ".join(["python3"] + sys.argv), device=meta.get("device"),
        nvidia_smi=nvidia_smi(), args=vars(args), elapsed_s=round(time.time() - t0, 1),
        versions=dict(python=platform.python_version(), **versions(
            ("jax", "jaxlib", "cutecall", "nvidia-cutlass-dsl", "quack-kernels",
             "flash-attn-4"))),
        rows=[{k: v for k, v in r.items() if k != "breakdown"} for r in rows],
        breakdown=breakdowns, skipped=skipped, children=runs)
    write_json(os.path.join(args.out, "scaling.json"), result)
    with open(os.path.join(args.out, "scaling.md"), "w") as f:
        f.write(page.render(result))
    with tarfile.open(os.path.join(args.out, "logs.tar.gz"), "w:gz") as t:
        t.add(work, arcname="work", filter=None if traces else lambda i: None
              if "/traces/" in i.name else i)
    if os.path.getsize(os.path.join(args.out, "logs.tar.gz")) > 15 << 20:  # traces too big
        with tarfile.open(os.path.join(args.out, "logs.tar.gz"), "w:gz") as t:
            t.add(work, arcname="work", filter=lambda i: None if "/traces/" in i.name else i)
    import shutil
    shutil.rmtree(work, ignore_errors=True)  # few files come back from the device
    print(page.summary(result))


if __name__ == "__main__":
    sys.exit(main())
