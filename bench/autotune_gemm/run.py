"""Autotuning QuACK's Hopper GEMM through ``cutecall.autotune``: the tuner's
pick against every configuration timed separately, and cuBLAS beside it.

For each problem shape (bf16 A (M, K) times B (N, K) transposed, bf16 D):

  tuned      ``quack_gemm.autotuned(compile_workers=W)`` called under
             ``jax.jit``: the tuner compiles the candidates in W worker
             processes, times each (its own timer: chained jitted calls) and
             keeps the fastest; its wall time, compiles and pick
  separate   every configuration timed on its own: device time per call
             from a JAX profiler trace of K chained calls in one jit
             (bench/timing.py), the pick's time over the best one's
  cublas     ``lax.dot_general`` (XLA's cuBLAS GEMM), the same way
  second     a fresh process with the same store runs the tuned call again
             and reports compiles, timing runs and its pick

The winner must be within 2% of the best separately timed configuration,
and the second process must compile nothing, time nothing and pick the same.

  python -m bench.autotune_gemm.run --out results.json [--workers 8]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from bench.harness import ROOT, module_command
from bench.timing import jax_trace_us

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 14336, 4096)]  # (M, N, K)
CHAIN = 10


def operands(m, n, k):
    import jax
    import jax.numpy as jnp
    ka, kb = jax.random.split(jax.random.key(0))
    return (jax.random.normal(ka, (m, k), jnp.float32).astype(jnp.bfloat16),
            jax.random.normal(kb, (n, k), jnp.float32).astype(jnp.bfloat16))


def cublas(a, b):
    from jax import lax
    return lax.dot_general(a, b, (((1,), (1,)), ((), ())))


def tflops(m, n, k, us):
    return 2 * m * n * k / us / 1e6


def tune_all(workers: int, separate: bool) -> list:
    import jax
    import jax.numpy as jnp
    from cutecall._driver.store import memory as compiler
    from cutecall.quack import gemm as quack_gemm
    gemm = quack_gemm.autotuned(compile_workers=workers)
    rows = []
    for m, n, k in SHAPES:
        a, b = operands(m, n, k)
        before, start = compiler.compile_stats(), time.perf_counter()
        d = jax.block_until_ready(jax.jit(gemm)(a, b))
        seconds = time.perf_counter() - start
        after, result = compiler.compile_stats(), gemm.report(a, b)
        ref = cublas(a.astype(jnp.float32), b.astype(jnp.float32))
        err = float(jnp.max(jnp.abs(d.astype(jnp.float32) - ref)) / jnp.max(jnp.abs(ref)))
        row = {"shape": [m, n, k], "winner": result.winner,
               "winner_tile": str(quack_gemm.SM90_TILES[result.winner]),
               "source": result.source, "timing_runs": result.timing_runs,
               "tuner_us": list(result.times_us), "errors": list(result.errors),
               "compiles": after["compiles"] - before["compiles"],
               "disk_hits": after["disk_hits"] - before["disk_hits"],
               "seconds": seconds, "max_rel_err": err}
        if separate:
            row["separate_us"] = [_device_us(quack_gemm.call(t, "bfloat16"), a, b)
                                  for t in quack_gemm.SM90_TILES]
            row["cublas_us"] = _device_us(cublas, a, b)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_us")}), flush=True)
    return rows


def _device_us(call, a, b):
    try:
        return jax_trace_us(call, (a, b), CHAIN)[0]
    except Exception as e:  # noqa: BLE001 (a failing config is reported)
        print(f"  timing failed: {type(e).__name__}: {e}", flush=True)
        return None


def summarize(first: list, second: list) -> list:
    from cutecall.quack import gemm as quack_gemm
    lines = ["| M×N×K | tuner's pick | pick µs (separate) | best (separate) | pick/best | "
             "cuBLAS µs | TFLOP/s pick / cuBLAS | 2nd process: compiles, timings, same pick |",
             "|---|---|---|---|---|---|---|---|"]
    for r, s in zip(first, second):
        m, n, k = r["shape"]
        sep = r["separate_us"]
        ok = [(t, i) for i, t in enumerate(sep) if t is not None]
        best_us, best = min(ok)
        pick_us = sep[r["winner"]]
        r["pick_over_best"] = pick_us / best_us
        lines.append(
            f"| {m}×{n}×{k} | {r['winner_tile']} | {pick_us:.1f} | "
            f"{best_us:.1f} ({quack_gemm.SM90_TILES[best]}) | {pick_us / best_us:.3f} | "
            f"{r['cublas_us']:.1f} | {tflops(m, n, k, pick_us):.0f} / "
            f"{tflops(m, n, k, r['cublas_us']):.0f} | {s['compiles']}, {s['timing_runs']}, "
            f"{'yes' if s['winner'] == r['winner'] else 'NO'} ({s['source']}) |")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.autotune_gemm.run",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--second", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.second:
        print("SECOND " + json.dumps(tune_all(0, separate=False)), flush=True)
        return
    os.environ.setdefault("CUTECALL_CACHE_DIR", tempfile.mkdtemp(prefix="cutecall_tune_"))
    os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"
    first = tune_all(args.workers, separate=True)
    out = subprocess.run(module_command("bench.autotune_gemm.run", "--second"), cwd=ROOT,
                         capture_output=True, text=True, env=os.environ)
    line = [x for x in out.stdout.splitlines() if x.startswith("SECOND ")]
    if not line:
        sys.exit(f"second process failed:\n{out.stdout}\n{out.stderr[-4000:]}")
    second = json.loads(line[0][len("SECOND "):])
    table = summarize(first, second)
    print("\n".join(table))
    import jax
    import cutlass
    result = {"benchmark": "autotune_gemm", "date": datetime.date.today().isoformat(),
              "device": jax.devices()[0].device_kind, "jax": jax.__version__,
              "dsl": cutlass.__version__, "python": platform.python_version(),
              "workers": args.workers, "chain": CHAIN, "tuned": first, "second": second,
              "table": table}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
