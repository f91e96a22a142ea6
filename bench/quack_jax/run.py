"""QuACK from JAX (``cutecall.quack``) against QuACK's own torch
functions, forward and forward+backward (a VJP with a given cotangent:
``jax.vjp`` / ``torch.autograd.grad(y, x, dy)``), bf16, side by side in one process.

  cutecall   device time per call from a JAX profiler trace of a chain of K
             calls in one jit (bench/timing.py)
  quack      QuACK's torch autograd functions (quack.softmax.softmax,
             quack.rmsnorm.rmsnorm, quack.cross_entropy.cross_entropy with
             reduction="none"): CUDA events around N back-to-back calls

  python -m bench.quack_jax.run --out results.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys

from bench.timing import jax_trace_us, torch_device_us

SHAPES = [(16384, 4096), (32768, 8192), (8192, 32768)]


def jax_fns(op, mode):
    import jax
    from cutecall import quack
    f = {"softmax": lambda x, w, t: quack.softmax(x),
         "rmsnorm": lambda x, w, t: quack.rmsnorm(x, w),
         "cross_entropy": lambda x, w, t: quack.cross_entropy(x, t)}[op]
    if mode == "fwd":
        return lambda x, w, t, dy: f(x, w, t)
    if op == "rmsnorm":
        return lambda x, w, t, dy: jax.vjp(lambda x, w: f(x, w, t), x, w)[1](dy)
    return lambda x, w, t, dy: jax.vjp(lambda x: f(x, w, t), x)[1](dy)


def torch_fn(op, mode, x, w, t, dy):
    import importlib

    import torch
    # quack's package exports functions under its submodules' names: import
    # the modules themselves.
    sm, rms, ce = (importlib.import_module(f"quack.{m}")
                   for m in ("softmax", "rmsnorm", "cross_entropy"))
    f = {"softmax": lambda x, w: sm.softmax(x),
         "rmsnorm": lambda x, w: rms.rmsnorm(x, w),
         "cross_entropy": lambda x, w: ce.cross_entropy(x, t, reduction="none")}[op]
    if mode == "fwd":
        def run():
            with torch.no_grad():
                f(x, w)
        return run
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_(op == "rmsnorm")
    wrt = (xg, wg) if op == "rmsnorm" else (xg,)

    def run():  # autograd.grad: no accumulation into .grad (an extra kernel)
        torch.autograd.grad(f(xg, wg), wrt, dy)
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.quack_jax.run",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_gpu_enable_command_buffer=").strip()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    rows = []
    for op in ("softmax", "rmsnorm", "cross_entropy"):
        for m, n in SHAPES:
            kx, kw, kt = jax.random.split(jax.random.key(0), 3)
            x = jax.random.normal(kx, (m, n)).astype(jnp.bfloat16)
            w = jax.random.normal(kw, (n,), jnp.float32)
            t = jax.random.randint(kt, (m,), 0, n, jnp.int32)
            dy = (jax.random.normal(kt, (m,), jnp.float32) if op == "cross_entropy"
                  else jax.random.normal(kt, (m, n)).astype(jnp.bfloat16))
            tx, tw = (torch.from_numpy(np.asarray(a.astype(jnp.float32))).cuda() for a in (x, w))
            tx = tx.to(torch.bfloat16)
            tdy = torch.from_numpy(np.asarray(dy.astype(jnp.float32))).cuda().to(
                torch.float32 if op == "cross_entropy" else torch.bfloat16)
            tt = torch.from_numpy(np.asarray(t)).cuda().long()
            for mode in ("fwd", "fwd_bwd"):
                row = dict(op=op, m=m, n=n, mode=mode)
                fn = jax_fns(op, mode)
                row["cutecall_us"] = min(jax_trace_us(fn, (x, w, t, dy), args.calls)[0]
                                         for _ in range(args.trials))
                tf = torch_fn(op, mode, tx, tw, tt, tdy)
                for _ in range(2):
                    tf()
                row["quack_us"] = min(torch_device_us(tf, args.calls)
                                      for _ in range(args.trials))
                row["speed_vs_quack"] = row["quack_us"] / row["cutecall_us"]
                rows.append(row)
                print(f"{op:13s} {m:6d}x{n:<6d} {mode:7s} cutecall {row['cutecall_us']:8.1f} us"
                      f"  quack {row['quack_us']:8.1f} us  {row['speed_vs_quack']:.3f}x",
                      flush=True)
    from importlib.metadata import version
    with open(args.out, "w") as f:
        json.dump({"benchmark": "quack_jax", "date": datetime.date.today().isoformat(),
                   "device": jax.devices()[0].device_kind, "dtype": "bfloat16",
                   "versions": {"python": platform.python_version(), "jax": jax.__version__,
                                "torch": torch.__version__,
                                "quack-kernels": version("quack-kernels")},
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
