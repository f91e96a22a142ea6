"""The part ``first-lowering`` of ``bench/warm_start/run.py``: a fresh
process's first lowering of one step, with every kernel in the store, side
by side with recipes on (cutecall's default: the store is read by what the
caller asked for, so no kernel library is imported) and off
(``CUTECALL_RECIPES=0``: the path before recipes, which builds each kernel
object to compute its key and so imports FA4, QuACK, torch and the DSL).

The step: ``jax.grad`` of a causal GQA ``cutecall.attention`` (bf16, (B, S,
H, Hkv, D) = (2, 1024, 8, 2, 128): 6 launches, 5 kernels) and a QuACK GEMM,
lowered for CUDA (no GPU needed). A first process fills an empty store;
then each mode runs ``--runs`` fresh processes, alternating. Per process:
wall and CPU seconds to the end of the lowering (interpreter start-up and
imports included), the import of JAX, compiles, store hits and which of
torch, flash_attn, quack and cutlass were loaded.

    python -m bench.warm_start.run first-lowering --runs 3 --out first_lowering.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import os, sys, time, json
t0 = time.perf_counter(); c0 = time.process_time()
import jax, jax.numpy as jnp
t_jax = time.perf_counter() - t0
import cutecall
from cutecall.attention import attention
from cutecall.quack import gemm
S = jax.ShapeDtypeStruct
q, kv = S((2, 1024, 8, 128), jnp.bfloat16), S((2, 1024, 2, 128), jnp.bfloat16)
loss = lambda q, k, v: attention(q, k, v, causal=True).astype(jnp.float32).sum()
jax.jit(jax.grad(loss, argnums=(0, 1, 2))).trace(q, kv, kv).lower(lowering_platforms=("cuda",))
a, b = S((4096, 4096), jnp.bfloat16), S((4096, 4096), jnp.bfloat16)
jax.jit(gemm.matmul).trace(a, b).lower(lowering_platforms=("cuda",))
stats = cutecall.compile_stats()
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "jax_import_s": t_jax, "compiles": stats["compiles"],
                  "hits": stats["disk_hits"] + stats["remote_hits"],
                  "libraries": sorted({m.split(".")[0] for m in sys.modules}
                                      & {"torch", "flash_attn", "quack", "cutlass"})}))
'''


def _run(store: str, recipes: bool) -> dict:
    env = dict(os.environ, CUTECALL_CACHE_DIR=store, CUTECALL_RECIPES="1" if recipes else "0")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["process_s"] = time.perf_counter() - start
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.warm_start.run first-lowering",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="fresh processes per mode")
    p.add_argument("--out", default=None, help="write the rows as JSON")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    args = p.parse_args(argv)
    if args.dry_run:
        print(f"first-lowering: 1 cold process, then {args.runs} x (recipes on, off)")
        return 0
    with tempfile.TemporaryDirectory(prefix="cutecall-first-lowering-") as store:
        cold = _run(store, True)
        rows = {"cold": [cold], "recipes": [], "no_recipes": []}
        for _ in range(args.runs):
            rows["recipes"].append(_run(store, True))
            rows["no_recipes"].append(_run(store, False))
    summary = {mode: {k: statistics.median(r[k] for r in rs)
                      for k in ("process_s", "wall_s", "cpu_s", "compiles")}
               for mode, rs in rows.items()}
    ratio = summary["no_recipes"]["process_s"] / summary["recipes"]["process_s"]
    for mode, s in summary.items():
        libs = rows[mode][-1]["libraries"]
        print(f"{mode:11} process {s['process_s']:6.2f} s  wall {s['wall_s']:6.2f} s  "
              f"cpu {s['cpu_s']:6.2f} s  compiles {s['compiles']:.0f}  imported {libs}")
    print(f"recipes: {ratio:.1f}x faster to the end of the first lowering")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "summary": summary, "speedup": ratio}, f, indent=1)
    return 0
