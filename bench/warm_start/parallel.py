#!/usr/bin/env python3
"""Parallel warm-up: eleven distinct kernels (FlashAttention-4's forward in
three configurations and its backward preprocess, QuACK's softmax, RMSNorm
forward and backward and cross-entropy, and three cutecall examples: GEMM,
transpose, row sum)
compiled into an empty artifact store by ``cutecall.warmup``:

  cold_serial    one worker compiles every task in turn
  cold_parallel  ``--workers`` (4) workers, another empty store
  warm           the same tasks again on the filled store (loads only)

Each figure is wall time of the whole ``warmup`` call (worker start-up and
imports included). The CuTe DSL's own file cache is off
(``CUTE_DSL_DISABLE_FILE_CACHING=1``), so cold means cold. No GPU needed:
compiles target sm_90a.

  python bench/warm_start/parallel.py --out results.json [--workers 4]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile


def _s(shape, dtype):
    import jax
    return jax.ShapeDtypeStruct(shape, dtype)


def _fa4(hdim=128, causal=False):
    from cutecall.examples import flash_attention_kernels as fk
    return fk, fk.Config("bfloat16", hdim, 1, causal)


def fa4_fwd(q):
    fk, c = _fa4()
    return fk.forward(c)(q, q, q, 0.088)


def fa4_fwd_causal(q):
    fk, c = _fa4(causal=True)
    return fk.forward(c)(q, q, q, 0.088)


def fa4_fwd_d64(q):
    fk, c = _fa4(hdim=64)
    return fk.forward(c)(q, q, q, 0.125)


def fa4_pre(o, lse):
    fk, c = _fa4()
    return fk.preprocess(c)(o, o, lse)


def softmax(x):
    from cutecall.examples import quack
    return quack.softmax(x)


def rmsnorm(x, w):
    from cutecall.examples import quack
    return quack.rmsnorm(x, w)


def rmsnorm_grad(x, w):
    import jax
    from cutecall.examples import quack
    return jax.grad(lambda x, w: quack.rmsnorm(x, w).astype("float32").sum(),
                    argnums=(0, 1))(x, w)


def cross_entropy(x, t):
    from cutecall.examples import quack
    return quack.cross_entropy(x, t)


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


def tasks():
    import cutecall
    q, x = _s((2, 4096, 16, 128), "bfloat16"), _s((16384, 4096), "bfloat16")
    stat = _s((2, 16, 4096), "float32")
    f32 = _s((512, 1024), "float32")
    # Longest first (the pool takes them in order). FA4's backward (~2x its
    # forward) is left out: one task that long bounds any parallel run.
    work = [(fa4_fwd, q), (fa4_fwd_causal, q), (fa4_fwd_d64, _s((2, 4096, 16, 64), "bfloat16")),
            (fa4_pre, q, stat), (softmax, x),
            (rmsnorm, x, _s((4096,), "float32")), (rmsnorm_grad, x, _s((4096,), "float32")),
            (cross_entropy, x, _s((16384,), "int32")),
            (gemm, _s((512, 256), "float16"), _s((256, 512), "float16")),
            (transpose, f32), (row_sum, f32)]
    return [cutecall.jax_warmup_task(fn, *specs) for fn, *specs in work]


def timed(workers: int, cache: str) -> dict:
    import cutecall
    os.environ["CUTECALL_CACHE_DIR"] = cache
    report = cutecall.warmup(tasks(), workers=workers)
    print(report, flush=True)
    return {"workers": workers, "seconds": report.seconds,
            "compiles": sum(r.compiles for r in report.results),
            "disk_hits": sum(r.disk_hits for r in report.results),
            "failed": [f"{r.name}: {r.error}" for r in report.failed]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"  # workers inherit it
    serial_dir, parallel_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    runs = {"cold_serial": timed(1, serial_dir),
            "cold_parallel": timed(args.workers, parallel_dir),
            "warm": timed(args.workers, parallel_dir)}
    runs["speedup"] = runs["cold_serial"]["seconds"] / runs["cold_parallel"]["seconds"]
    print(f"cold serial {runs['cold_serial']['seconds']:.1f} s, cold parallel "
          f"{runs['cold_parallel']['seconds']:.1f} s ({runs['speedup']:.2f}x), warm "
          f"{runs['warm']['seconds']:.1f} s")
    with open(args.out, "w") as f:
        json.dump({"benchmark": "warm_start_parallel", "date": datetime.date.today().isoformat(),
                   "cpus": os.cpu_count(), "python": platform.python_version(), **runs},
                  f, indent=1)


if __name__ == "__main__":
    main()
