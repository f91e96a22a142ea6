#!/usr/bin/env python3
"""Attention, side by side in one process: FlashAttention-4 from JAX through
cutecall (``cutecall.examples.flash_attention``), FA4's own torch path
(``flash_attn.cute.flash_attn_func``), and JAX's
``jax.nn.dot_product_attention`` with the cuDNN and the XLA implementations.

For each head dim, causal or not, and sequence length S (bf16, 16k tokens
per batch: B = 16384 / S, hidden 2048: H = 2048 / D, as FA's own benchmarks),
forward and forward+backward:

  cutecall, cudnn, xla  device time per call from a JAX profiler trace of a
                        chain of K calls in one ``jit`` (``bench/timing.py``)
  fa4_torch             CUDA events around N back-to-back calls (forward
                        under ``torch.no_grad``; forward+backward with
                        ``o.backward(do)``)

TFLOP/s count 4·B·H·S²·D for the forward (half when causal) and 2.5 times
that for the backward. A path that fails (XLA out of memory at long S)
records its error. ``bench/attention/plot.py`` draws the figure.

  python bench/attention/run.py --out results.json [--dims 64,128]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from timing import jax_trace_us, torch_device_us  # noqa: E402

TOKENS, HIDDEN = 16384, 2048
PATHS = ("cutecall", "fa4_torch", "cudnn", "xla")


def flops(b, h, s, d, causal, mode) -> float:
    fwd = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
    return fwd * (3.5 if mode == "fwd_bwd" else 1.0)


def jax_fn(path: str, causal: bool, mode: str):
    import jax
    from cutecall.examples.flash_attention import attention

    if path == "cutecall":
        def f(q, k, v):
            return attention(q, k, v, causal=causal)
    else:
        def f(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                                implementation=path)
    if mode == "fwd":
        return lambda q, k, v, do: f(q, k, v)
    return lambda q, k, v, do: jax.vjp(f, q, k, v)[1](do)


def torch_fn(causal: bool, mode: str, q, k, v, do):
    import torch
    from flash_attn.cute import flash_attn_func

    if mode == "fwd":
        def run():
            with torch.no_grad():
                flash_attn_func(q, k, v, causal=causal)
        return run
    qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))

    def run():
        out = flash_attn_func(qg, kg, vg, causal=causal)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(do)
    return run


def measure(d: int, causal: bool, s: int, args) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    b, h = TOKENS // s, HIDDEN // d
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v, do = (jax.random.normal(key, (b, s, h, d), jnp.float32).astype(jnp.bfloat16)
                   for key in keys)
    tq, tk, tv, tdo = (torch.from_numpy(np.asarray(x.astype(jnp.float32))).cuda()
                       .to(torch.bfloat16) for x in (q, k, v, do))
    rows = []
    for mode in ("fwd", "fwd_bwd"):
        for path in args.paths:
            row = dict(d=d, causal=causal, seqlen=s, batch=b, heads=h, mode=mode, path=path)
            try:
                if path == "fa4_torch":
                    fn = torch_fn(causal, mode, tq, tk, tv, tdo)
                    for _ in range(2):
                        fn()
                    us = min(torch_device_us(fn, args.calls) for _ in range(args.trials))
                else:
                    fn = jax_fn(path, causal, mode)
                    us = min(jax_trace_us(fn, (q, k, v, do), args.calls)[0]
                             for _ in range(args.trials))
                row.update(us=us, tflops=flops(b, h, s, d, causal, mode) / us / 1e6)
            except Exception as e:  # noqa: BLE001 (recorded, the sweep goes on)
                row.update(error=f"{type(e).__name__}: {str(e)[:300]}")
                traceback.print_exc(limit=2)
            rows.append(row)
            shown = f"{row['us']:9.1f} us {row['tflops']:6.1f} TFLOP/s" if "us" in row \
                else row["error"][:60]
            print(f"D{d} {'causal' if causal else 'full  '} S{s:6d} {mode:7s} "
                  f"{path:9s} {shown}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--calls", type=int, default=5, help="calls per timed chain")
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    args.paths = args.paths.split(",")
    # XLA's command buffers re-record a chain's graph every run (a cost of
    # the harness, not of a program): off, as in bench/external.
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_gpu_enable_command_buffer=").strip()
    import jax
    import torch

    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        for causal in (bool(int(x)) for x in args.causal.split(",")):
            for s in (int(x) for x in args.seqlens.split(",")):
                rows += measure(d, causal, s, args)
    from importlib.metadata import version
    result = {
        "benchmark": "attention", "date": datetime.date.today().isoformat(),
        "device": jax.devices()[0].device_kind, "tokens": TOKENS, "hidden": HIDDEN,
        "dtype": "bfloat16", "calls": args.calls, "trials": args.trials,
        "versions": {"python": platform.python_version(), "jax": jax.__version__,
                     "torch": torch.__version__,
                     "flash-attn-4": version("flash-attn-4"),
                     "nvidia-cutlass-dsl": version("nvidia-cutlass-dsl")},
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
