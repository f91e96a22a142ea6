"""The part ``parallel`` of ``bench/warm_start/run.py``: a list of distinct kernels compiled into an empty
artifact store by ``cutecall.warmup`` (``--set``, see :func:`tasks`:
"inference", eleven kernels; "training", 45 tasks: a training step's
attention kernels and its GEMM's tile candidates):

  cold_serial    one worker compiles every task in turn
  cold_parallel  ``--workers`` (4) workers, another empty store
  warm           the same tasks again on the filled store (loads only)

Each run is a fresh process that first imports what the tasks use
(``PRELOAD``, as a training script has; the seconds are recorded apart), and
each figure is the wall time of its whole ``warmup`` call: the workers'
start (``--start``: "auto" forks this process, which runs no GPU client;
"forkserver" starts a fork server that imports everything again) and every
compile. The CuTe DSL's own file cache is off
(``CUTE_DSL_DISABLE_FILE_CACHING=1``), so cold means cold. No GPU needed:
compiles target sm_90a (set ``CUTECALL_ARCH=sm_90a`` on a machine without
one).

  python -m bench.warm_start.run parallel --out results.json [--workers 4] [--set training]
                                          [--start auto|fork|forkserver]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import tempfile

from bench.harness import ROOT, module_command


def _s(shape, dtype):
    import jax
    return jax.ShapeDtypeStruct(shape, dtype)


def _fa4(hdim=128, causal=False):
    from cutecall.attention import kernels as fk
    return fk, fk.Config("bfloat16", hdim, 1, causal)


def fa4_fwd(q, hdim=128, causal=False):
    fk, c = _fa4(hdim, causal)
    return fk.forward(c)(q, q, q, hdim ** -0.5)


def fa4_pre(o, lse, hdim=128, causal=False):
    fk, c = _fa4(hdim, causal)
    return fk.preprocess(c)(o, o, lse)


def fa4_bwd(q, stat, acc, hdim=128, causal=False):
    fk, c = _fa4(hdim, causal)
    return fk.backward(c)(q, q, q, q, stat, stat, acc, None, None, hdim ** -0.5)


def fa4_post(acc, q, hdim=128, causal=False):
    fk, c = _fa4(hdim, causal)
    return fk.postprocess(c, "dq")(acc, q, hdim ** -0.5)


def softmax(x):
    from cutecall import quack
    return quack.softmax(x)


def rmsnorm(x, w):
    from cutecall import quack
    return quack.rmsnorm(x, w)


def rmsnorm_grad(x, w):
    import jax
    from cutecall import quack
    return jax.grad(lambda x, w: quack.rmsnorm(x, w).astype("float32").sum(),
                    argnums=(0, 1))(x, w)


def cross_entropy(x, t):
    from cutecall import quack
    return quack.cross_entropy(x, t)


def quack_gemm(a, b, tile):
    from cutecall.quack import gemm as qg
    return qg.call(qg.Tile(*tile), str(a.dtype))(a, b)


def _example(kernel, out, *args):
    import cutecall
    from cutecall.examples import kernels
    return cutecall.cutlass_call(getattr(kernels, kernel), output_shape_dtype=out)(*args)


def gemm(a, b):
    return _example("gemm", _s((a.shape[0], b.shape[1]), "float32"), a, b)


def transpose(x):
    return _example("transpose", _s(x.shape[::-1], x.dtype), x)


def row_sum(x):
    return _example("row_sum", _s(x.shape[:1], "float32"), x)


def tasks(which: str = "inference"):
    """The task list, longest first (the pool hands tasks out in order).

    inference: eleven kernels, FA4's forward in three configurations and its
      backward preprocess, four QuACK kernels, three cutecall examples;
    training: a training step's attention kernels and its GEMM's autotuning
      candidates, 45 tasks: for FA4 at D 64/128, causal or not, the forward,
      backward, preprocess and dQ postprocess; QuACK's Hopper GEMM in its 22
      sm90 tile configurations; QuACK's softmax, RMSNorm forward and
      backward and cross-entropy; cutecall's GEMM, transpose and row sum."""
    import functools

    import cutecall
    x = _s((16384, 4096), "bfloat16")
    w = _s((4096,), "float32")
    f32 = _s((512, 1024), "float32")
    small = [(softmax, x), (rmsnorm, x, w), (rmsnorm_grad, x, w),
             (cross_entropy, x, _s((16384,), "int32")),
             (gemm, _s((512, 256), "float16"), _s((256, 512), "float16")),
             (transpose, f32), (row_sum, f32)]
    fa4 = [(128, False), (128, True), (64, False), (64, True)]
    if which == "inference":
        work = [(functools.partial(fa4_fwd, hdim=d, causal=c), _q(d)) for d, c in fa4[:3]]
        work += [(fa4_pre, _q(128), _s((2, 16, 4096), "float32"))] + small
    else:
        from cutecall.attention import kernels as fk
        from cutecall.quack import gemm as qg
        work = []
        for d, c in fa4:
            stat, acc = fk.Config("bfloat16", d, 1, c).accum_shapes(2, 4096, 16)
            kw = dict(hdim=d, causal=c)
            work += [(functools.partial(fa4_bwd, **kw), _q(d), _s(stat, "float32"),
                      _s(acc, "float32")),
                     (functools.partial(fa4_fwd, **kw), _q(d)),
                     (functools.partial(fa4_pre, **kw), _q(d), _s((2, 16, 4096), "float32")),
                     (functools.partial(fa4_post, **kw), _s(acc, "float32"), _q(d))]
        a, b = _s((4096, 4096), "bfloat16"), _s((8192, 4096), "bfloat16")
        work += [(functools.partial(quack_gemm, tile=tuple(dataclasses.astuple(t))), a, b)
                 for t in qg.SM90_TILES]
        work += small
    return [cutecall.jax_warmup_task(fn, *specs) for fn, *specs in work]


def _q(hdim):
    return _s((2, 4096, 16, hdim), "bfloat16")


# What the tasks use: a training script has these imported before it warms up.
PRELOAD = ("flash_attn.cute", "flash_attn.cute.flash_fwd_sm90",
           "flash_attn.cute.flash_bwd_sm90", "flash_attn.cute.flash_bwd_preprocess",
           "flash_attn.cute.flash_bwd_postprocess", "quack", "quack.gemm_default_epi",
           "quack.tile_scheduler", "cutecall.attention.kernels",
           "cutecall.quack", "cutecall.quack.gemm",
           "cutecall.examples.kernels")


def timed(workers: int, which: str, start: str) -> dict:
    import importlib
    import time

    import cutecall
    import cutecall.services.workers
    t0 = time.perf_counter()
    for module in cutecall.services.workers.PRELOAD + PRELOAD:
        importlib.import_module(module)
    imports = time.perf_counter() - t0
    report = cutecall.warmup(tasks(which), workers=workers, preload=PRELOAD, start=start)
    print(report, flush=True)
    return {"workers": workers, "start": report.start, "imports_before_s": round(imports, 2),
            "seconds": report.seconds,
            "compiles": sum(r.compiles for r in report.results),
            "disk_hits": sum(r.disk_hits for r in report.results),
            "tasks": len(report.results),
            "task_seconds": {r.name: round(r.seconds, 2) for r in report.results},
            "failed": [f"{r.name}: {r.error}" for r in report.failed]}


def run_in_child(workers: int, which: str, cache: str, start: str) -> dict:
    """One ``warmup`` call in a fresh process that has imported what the
    tasks use, as a user's program would have."""
    env = dict(os.environ, CUTECALL_CACHE_DIR=cache)
    out = subprocess.run(module_command("bench.warm_start.run", "parallel", "--child",
                                        str(workers), "--set", which, "--start", start),
                         cwd=ROOT, env=env, capture_output=True, text=True)
    print(out.stdout[-6000:], out.stderr[-3000:] if out.returncode else "", flush=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if not line:
        raise SystemExit(f"warm-up child failed (exit {out.returncode})")
    return json.loads(line[-1][len("RESULT "):])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.warm_start.run parallel",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--set", default="inference", choices=("inference", "training"))
    ap.add_argument("--start", default="auto", choices=("auto", "fork", "forkserver"),
                    help="how workers start (cutecall.warmup's start=)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"  # workers inherit it
    if args.child is not None:
        print("RESULT " + json.dumps(timed(args.child, args.set, args.start)), flush=True)
        return
    serial_dir, parallel_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    runs = {"cold_serial": run_in_child(1, args.set, serial_dir, args.start),
            "cold_parallel": run_in_child(args.workers, args.set, parallel_dir, args.start),
            "warm": run_in_child(args.workers, args.set, parallel_dir, args.start)}
    runs["speedup"] = runs["cold_serial"]["seconds"] / runs["cold_parallel"]["seconds"]
    print(f"{args.set} ({runs['cold_parallel']['start']}): "
          f"{runs['cold_serial']['tasks']} tasks, cold serial "
          f"{runs['cold_serial']['seconds']:.1f} s, cold parallel "
          f"{runs['cold_parallel']['seconds']:.1f} s ({runs['speedup']:.2f}x), warm "
          f"{runs['warm']['seconds']:.1f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"benchmark": "warm_start_parallel", "set": args.set,
                       "date": datetime.date.today().isoformat(), "cpus": os.cpu_count(),
                       "python": platform.python_version(), **runs}, f, indent=1)

