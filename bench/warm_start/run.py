"""Warm-start benchmark: what the artifact store saves a new process; its
parts ``parallel`` (``cutecall.warmup``'s workers), ``cluster`` (one compile
per kernel across N processes), ``first-step`` (a 4-GPU job's first step)
and ``first-lowering`` (a fresh process's first lowering of FA4 and a QuACK
GEMM, recipes on against off) are in ``parallel.py``, ``cluster.py``,
``first_step.py`` and ``first_lowering.py``.

The same program runs in fresh processes, one after the other, sharing one
cache directory (``CUTECALL_CACHE_DIR``), which starts empty:

  cold   the first process: every kernel is compiled by the CuTe DSL (and stored)
  warm   ``--warm-runs`` (3) later processes: every kernel is loaded from disk

The program builds 10 cutecall calls (7 ``cutecall.examples.kernels``
launchers, GEMM included, and 3 ``examples.layouts`` copies), jits one
function that runs them all, and blocks on its results ("first result");
each result is checked against numpy. Per process this records:

  ttfr_s       time to first result, from the parent starting the process
               (interpreter start-up and imports included)
  imports_s    importing jax, cutecall and the kernel modules
  backend_s    starting JAX's backend (``jax.devices()``: CUDA init on a GPU)
  program_s    from the first call to the results being ready: tracing,
               kernel compiles or loads, XLA's own compile, the run
  kernels_s    the part of program_s spent getting the 10 kernels (inside
               cutecall's compile driver: DSL compiles, or store loads)
  compiles     ``cutecall.compile_stats()['compiles']``: CuTe DSL compiles
  disk_hits    kernels loaded from the artifact store
  correct      every result matched its numpy reference

Reading: importing jax and the CuTe DSL (whose ``@cute.jit`` launchers the
program defines) costs every process the same ~1.3 s on a 2-core CPU host, so
it bounds the end-to-end ratio ttfr_s(cold) / ttfr_s(warm); program_s and
kernels_s isolate what the store changes.

``--jax-cache`` also gives the processes JAX's persistent compilation cache
(a second directory, also empty at the start), so warm processes skip XLA's
compile of the program too: the best warm start a JAX user can configure.

``--no-run`` (no GPU needed) lowers the program for CUDA instead of running
it: compiles happen during lowering, so compiles, disk hits and times still
mean the same, minus XLA's compile and the run.

    python -m bench.warm_start.run --out warm_start.json
    python -m bench.warm_start.run --no-run          # CPU-only machine
    python -m bench.warm_start.run parallel|cluster|first-step --help
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from bench.harness import ROOT, module_command
from bench.report import nvidia_smi, versions
from bench.warm_start import cluster, first_lowering, first_step, parallel

PARTS = {"parallel": parallel.main, "cluster": cluster.main,
         "first-step": first_step.main, "first-lowering": first_lowering.main}

KERNELS = 10


def _program_specs(jnp):
    """(name, module, launcher, inputs as (shape, dtype), output, constexprs)."""
    f32, f16, i32 = jnp.float32, jnp.float16, jnp.int32
    return [
        ("empty", "kernels", "empty_launcher", [((1024,), f32)], ((1024,), f32), {}),
        ("vector_add", "kernels", "vector_add", [((1000,), f32)] * 2, ((1000,), f32), {}),
        ("scale_bias_act", "kernels", "scale_bias_act", [((64, 33), f32), ((33,), f32)],
         ((64, 33), f32), dict(alpha=0.5, relu=True)),
        ("transpose", "kernels", "transpose", [((70, 40), f16)], ((40, 70), f16), {}),
        ("row_sum", "kernels", "row_sum", [((9, 1000), f32)], ((9,), f32), {}),
        ("gemm", "kernels", "gemm", [((256, 64), f16), ((64, 128), f16)], ((256, 128), f32), {}),
        ("copy", "kernels", "copy", [((1 << 20,), f32)], ((1 << 20,), f32), {}),
        ("copy1d", "layouts", "copy1d", [((777,), i32)], ((777,), i32), {}),
        ("copy2d", "layouts", "copy2d", [((33, 65), f32)], ((33, 65), f32), {}),
        ("copy3d", "layouts", "copy3d", [((4, 5, 6), f32)], ((4, 5, 6), f32), {}),
    ]


def child(mode: str) -> dict:
    """One process of the benchmark (``--child``): prints its record."""
    t0 = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np

    import cutecall
    from cutecall._driver import fallback_climb as _fallback
    from cutecall.examples import kernels, layouts
    t_imports = time.perf_counter()
    jax.devices()
    t_backend = time.perf_counter()

    kernel_time = [0.0]
    climb = _fallback.climb

    def timed(*args, **kwargs):  # measures the compile driver, changes nothing
        start = time.perf_counter()
        try:
            return climb(*args, **kwargs)
        finally:
            kernel_time[0] += time.perf_counter() - start
    _fallback.climb = timed

    modules = {"kernels": kernels, "layouts": layouts}
    specs = _program_specs(jnp)
    calls, inputs, rng = [], [], np.random.default_rng(0)
    for name, mod, fn, ins, (oshape, odtype), constexprs in specs:
        calls.append(cutecall.cutlass_call(
            getattr(modules[mod], fn), output_shape_dtype=jax.ShapeDtypeStruct(oshape, odtype),
            **constexprs))
        inputs.append([(rng.standard_normal(s) * 4).astype(d) for s, d in ins])

    def program(args):
        return [call(*a) for call, a in zip(calls, args)]

    jitted = jax.jit(program)
    correct = None
    if mode == "run":
        results = jax.block_until_ready(jitted(inputs))
        t_result = time.perf_counter()
        correct = all(_check(spec, a, r, kernels) for spec, a, r in zip(specs, inputs, results))
    else:
        structs = [[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in a] for a in inputs]
        text = jitted.trace(structs).lower(lowering_platforms=("cuda",)).as_text()
        t_result = time.perf_counter()
        assert text.count("@cutecall_call_v1") >= KERNELS, "custom calls missing"
    stats = cutecall.compile_stats()
    return {"imports_s": t_imports - t0, "backend_s": t_backend - t_imports,
            "program_s": t_result - t_backend, "kernels_s": kernel_time[0],
            "compiles": stats["compiles"], "disk_hits": stats["disk_hits"],
            "correct": correct, "end_wall": time.time()}


def _check(spec, args, result, kernels) -> bool:
    import numpy as np
    name, _, fn, _, _, constexprs = spec
    ref = kernels.REFERENCES.get(fn, lambda x: x)(*args, **constexprs)
    if ref is None:  # empty kernel: nothing to compare
        return True
    got = np.asarray(result).astype(np.float64)
    ok = np.allclose(got, np.asarray(ref).astype(np.float64), rtol=1e-2, atol=1e-2)
    if not ok:
        print(f"warm_start: {name} differs from its reference", file=sys.stderr)
    return bool(ok)


def run_process(mode: str, cache: str, jax_cache: str | None) -> dict:
    env = dict(os.environ, CUTECALL_CACHE_DIR=cache)
    if jax_cache:
        env.update(JAX_COMPILATION_CACHE_DIR=jax_cache,
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    start = time.time()
    out = subprocess.run(module_command("bench.warm_start.run", "--child", mode), cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"warm_start: the {mode} process failed (exit {out.returncode}):\n"
                         f"{out.stderr[-4000:]}")
    record = json.loads(out.stdout.strip().splitlines()[-1])
    record["ttfr_s"] = record.pop("end_wall") - start
    record["process_s"] = time.time() - start
    return record


def environment() -> dict:
    env = versions(("jax", "jaxlib", "nvidia-cutlass-dsl", "cuda-bindings",
                    "nvidia-cutlass-dsl-libs-cu13"))
    gpu = (nvidia_smi("name,driver_version") or "").splitlines()
    env.update(python=platform.python_version(), host=platform.node(),
               device=gpu[0] if gpu else "no GPU",
               date=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    return env


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in PARTS:
        return PARTS[argv[0]](argv[1:])
    p = argparse.ArgumentParser(prog="python -m bench.warm_start.run",
                                description=__doc__.split("\n")[0],
                                epilog="parts: parallel, cluster, first-step, "
                                       "first-lowering (python -m bench.warm_start.run "
                                       "PART --help)")
    p.add_argument("--no-run", action="store_true",
                   help="lower for CUDA instead of running (no GPU needed)")
    p.add_argument("--warm-runs", type=int, default=3, help="warm processes (default 3)")
    p.add_argument("--cache-dir", help="an empty or missing directory to use "
                   "(default: a new temporary one)")
    p.add_argument("--jax-cache", action="store_true",
                   help="also use JAX's persistent compilation cache")
    p.add_argument("--out", help="write the results as JSON to this path")
    p.add_argument("--child", choices=("run", "lower"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if args.warm_runs < 1:
        p.error(f"--warm-runs must be at least 1, got {args.warm_runs}")
    cache = args.cache_dir or tempfile.mkdtemp(prefix="cutecall-warm-start-")
    if os.path.isdir(cache) and os.listdir(cache):
        p.error(f"--cache-dir {cache} is not empty: the cold run needs an empty cache")
    mode = "lower" if args.no_run else "run"
    jax_cache = tempfile.mkdtemp(prefix="jax-cache-") if args.jax_cache else None
    runs = [dict(run_process(mode, cache, jax_cache), kind="cold")]
    runs += [dict(run_process(mode, cache, jax_cache), kind="warm")
             for _ in range(args.warm_runs)]
    cold, warm = runs[0], runs[1:]
    summary = {
        "ttfr_speedup": cold["ttfr_s"] / statistics.median(r["ttfr_s"] for r in warm),
        "program_speedup": cold["program_s"] / statistics.median(r["program_s"] for r in warm),
        "kernels_speedup": cold["kernels_s"] / statistics.median(r["kernels_s"] for r in warm),
        "warm_compiles": max(r["compiles"] for r in warm),
        "all_correct": all(r["correct"] is not False for r in runs),
    }
    print(f"mode: {mode}; cache: {cache}; JAX compilation cache: {jax_cache or 'off'}")
    cols = ("ttfr_s", "imports_s", "backend_s", "program_s", "kernels_s")
    print(f"{'process':8}" + "".join(f"{c:>11}" for c in cols)
          + f"{'compiles':>10}{'disk hits':>10}{'correct':>8}")
    for r in runs:
        print(f"{r['kind']:8}" + "".join(f"{r[c]:11.3f}" for c in cols)
              + f"{r['compiles']:10d}{r['disk_hits']:10d}{str(r['correct']):>8}")
    print(f"warm vs cold (median of warm runs): time to first result "
          f"{summary['ttfr_speedup']:.1f}x, program {summary['program_speedup']:.1f}x, "
          f"kernels {summary['kernels_speedup']:.0f}x; warm compiles: "
          f"{summary['warm_compiles']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"benchmark": "warm_start", "mode": mode, "kernels": KERNELS,
                       "jax_cache": bool(jax_cache),
                       "environment": environment(), "summary": summary, "runs": runs},
                      f, indent=2)
        print(f"wrote {args.out}")
    ok = summary["warm_compiles"] == 0 and cold["compiles"] == KERNELS \
        and summary["all_correct"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
