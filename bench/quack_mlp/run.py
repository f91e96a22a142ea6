"""The fused MLP of ``cutecall.quack.mlp`` (QuACK's GEMMs from JAX)
against the same QuACK calls from torch and against XLA, forward and
forward+backward, bf16, LLM shapes, side by side in one process.

For each (tokens, d, hidden), ``act(x @ w1.T) @ w2.T`` with w1 (hidden, d),
w2 (d, hidden); forward+backward is a VJP with a given cotangent (out, dx,
dw1, dw2 from 6 GEMMs); forward alone is the no-grad pass (2 GEMMs):

  cutecall  ``quack_mlp.mlp`` autotuned over QuACK's sm90 tiles (the
            candidates compiled first in --workers processes; tuning time
            and compiles recorded); device time per call from a JAX profiler
            trace of --calls chained calls in one jit (bench/timing.py):
            span first kernel start .. last kernel end, and busy (kernel sum)
  quack     the same QuACK calls from torch (``gemm_act``, ``gemm``,
            ``gemm_dact``: ``quack_mlp_kernels.authors_torch``) pinned to the
            tiles cutecall's tuner picked per site: CUDA events around
            --calls back-to-back passes; outputs checked bit for bit against
            cutecall's
  xla       ``quack_mlp.xla_mlp`` (XLA's dot + activation), timed as cutecall

Trials interleave the paths; medians are reported (min and all in the JSON).
Writes --out (JSON) and the page (--page, default quack_mlp.md next to the
JSON; ``--render JSON`` rewrites it from a JSON). A shape's first
run compiles 132 candidates (in --workers processes) and tunes 7 sites x 22
tiles (minutes); the winners stay in cutecall's artifact store, so a later
run on the same machine tunes and compiles nothing. Under the GPU tool's
540 s limit, tune one shape per call first:

  python -m bench.quack_mlp.run --out $OUT/quack_mlp.json --shapes 8192x4096x11008
  python -m bench.quack_mlp.run --out $OUT/quack_mlp.json      # both shapes
  python -m bench.quack_mlp.run --render bench/results/quack_mlp.json  # the page again
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

from bench.quack_mlp import page
from bench.report import nvidia_smi, versions, write_json
from bench.timing import jax_trace_us, torch_device_us

SHAPES = "8192x4096x11008,8192x4096x16384"   # tokens x d x hidden


def operands(tokens, d, hidden):
    import jax
    import jax.numpy as jnp
    kx, k1, k2, kd = jax.random.split(jax.random.key(0), 4)
    bf16 = jnp.bfloat16
    return (jax.random.normal(kx, (tokens, d)).astype(bf16),
            (jax.random.normal(k1, (hidden, d)) / d ** 0.5).astype(bf16),
            (jax.random.normal(k2, (d, hidden)) / hidden ** 0.5).astype(bf16),
            jax.random.normal(kd, (tokens, d)).astype(bf16))


def jax_passes(mlp):
    """{pass: f(x, w1, w2, dout)}: the forward, and the VJP with cotangent dout."""
    import jax

    def fwd_bwd(x, w1, w2, dout):
        out, vjp = jax.vjp(mlp, x, w1, w2)
        return (out,) + vjp(dout)
    return {"fwd": lambda x, w1, w2, dout: mlp(x, w1, w2), "fwd_bwd": fwd_bwd}


def torch_passes(chosen, activation, targs):
    """The same passes as QuACK's torch calls pinned to `chosen` (site -> Tile)."""
    from cutecall.quack import mlp_kernels as qmk
    q = {site: qmk.authors_torch(kernel, chosen[site], activation)
         for site, kernel in (("fc1", "act"), ("fc2", "fc2"), ("dact", "dact"),
                              ("dw2", "wgrad"), ("dx", "dgrad"), ("dw1", "wgrad"))}
    infer = qmk.authors_torch("act_infer", chosen["fc1_infer"], activation)
    x, w1, w2, dout = targs

    def fwd():
        return q["fc2"](infer(x, w1), w2)

    def fwd_bwd():   # quack.mlp.mlp_func, call for call
        preact, postact = q["fc1"](x, w1)
        out = q["fc2"](postact, w2)
        dpreact, postact = q["dact"](dout, w2, preact)
        dw2 = q["dw2"](dout, postact)
        return out, q["dx"](dpreact, w1), q["dw1"](dpreact, x), dw2
    return {"fwd": fwd, "fwd_bwd": fwd_bwd}


def to_torch(a):
    import numpy as np
    import torch
    return torch.from_numpy(np.asarray(a).view(np.int16).copy()).cuda().view(torch.bfloat16)


def bitwise_equal(jax_outs, torch_outs) -> bool:
    import numpy as np
    import torch
    jax_outs = jax_outs if isinstance(jax_outs, tuple) else (jax_outs,)
    torch_outs = torch_outs if isinstance(torch_outs, tuple) else (torch_outs,)
    return all(np.array_equal(np.asarray(a).view(np.int16),
                              b.contiguous().cpu().view(torch.int16).numpy())
               for a, b in zip(jax_outs, torch_outs))


def tune(args, activation, candidates, workers) -> tuple:
    """Compiles the candidates in workers, runs both passes once under jit
    (the tuners decide at trace time). Returns (what that cost and chose,
    site -> Tile, the tuned mlp)."""
    import jax

    import cutecall
    from cutecall.quack import mlp as quack_mlp
    x, w1, w2, dout = args
    rec = {}
    if workers > 1:
        start = time.perf_counter()
        report = quack_mlp.warmup(x, w1, w2, activation, candidates=candidates,
                                  workers=workers)
        rec["warmup_s"] = time.perf_counter() - start
        rec["warmup_failed"] = [r.name for r in report.failed]
    before = cutecall.compile_stats()["compiles"]
    start = time.perf_counter()
    mlp = lambda x, w1, w2: quack_mlp.mlp(x, w1, w2, activation,  # noqa: E731
                                          candidates=candidates)
    for f in jax_passes(mlp).values():
        jax.block_until_ready(jax.jit(f)(*args))
    rec["tune_s"] = time.perf_counter() - start
    rec["compiles_in_process"] = cutecall.compile_stats()["compiles"] - before
    results = quack_mlp.tuning_results(x, w1, w2, activation, candidates=candidates)
    rec["sources"] = {s: r.source for s, r in results.items()}
    chosen = quack_mlp.chosen_tiles(x, w1, w2, activation, candidates=candidates)
    infer = quack_mlp.tuner("act_infer", "bfloat16", activation, candidates).report(
        *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (x, w1)))
    chosen["fc1_infer"] = candidates[infer.winner]
    rec["tiles"] = {s: str(t) for s, t in chosen.items()}
    return rec, chosen, mlp


def run_shape(shape, args) -> dict:
    import jax
    import torch

    from cutecall.quack import gemm as quack_gemm, mlp as quack_mlp
    candidates = quack_gemm.SM90_TILES[:args.candidates]
    jargs = operands(*shape)
    rec = {"tokens": shape[0], "d": shape[1], "hidden": shape[2],
           "activation": args.activation, "candidates": len(candidates), "paths": {}}
    tuning, chosen, mlp = tune(jargs, args.activation, candidates, args.workers)
    rec["tuning"] = tuning
    targs = tuple(to_torch(a) for a in jargs)
    paths = {"cutecall": ("jax", jax_passes(mlp)),
             "quack": ("torch", torch_passes(chosen, args.activation, targs)),
             "xla": ("jax", jax_passes(lambda x, w1, w2: quack_mlp.xla_mlp(
                 x, w1, w2, args.activation)))}
    for name, f in paths["quack"][1].items():   # warm: QuACK compiles on first call
        theirs = f()
        torch.cuda.synchronize()
        ours = jax.jit(paths["cutecall"][1][name])(*jargs)
        rec[f"{name}_bitwise_equal_to_quack"] = bitwise_equal(ours, theirs)
    samples = {(p, n): {"device_us": [], "busy_us": []} for p in paths for n in ("fwd", "fwd_bwd")}
    for _ in range(args.trials):
        for (path, name), s in samples.items():
            kind, fns = paths[path]
            if kind == "jax":
                span, busy = jax_trace_us(fns[name], jargs, args.calls)
                s["device_us"].append(span)
                s["busy_us"].append(busy)
            else:
                s["device_us"].append(torch_device_us(fns[name], args.calls))
    for (path, name), s in samples.items():
        rec["paths"].setdefault(path, {})[name] = {
            k: {"median": statistics.median(v), "min": min(v), "all": v}
            for k, v in s.items() if v}
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.quack_mlp.run",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="the JSON")
    ap.add_argument("--page", help="the markdown page (default: quack_mlp.md next to --out; "
                                   "bench/results/quack_mlp.md is the committed one)")
    ap.add_argument("--shapes", default=SHAPES, help="tokens x d x hidden, comma-separated")
    ap.add_argument("--activation", default="gelu_tanh_approx")
    ap.add_argument("--candidates", type=int, default=22,
                    help="tune over the first N of QuACK's 22 sm90 tiles")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1),
                    help="processes compiling the candidates (<= 1: in process)")
    ap.add_argument("--calls", type=int, default=10, help="calls per chain / event window")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--render", metavar="JSON", help="write the page of this JSON, beside it")
    args = ap.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            data = json.load(f)
        md = os.path.join(os.path.dirname(os.path.abspath(args.render)), "quack_mlp.md")
        with open(md, "w") as f:
            f.write(page.render(data))
        print(f"wrote {md}", file=sys.stderr)
        return 0
    if not args.out:
        ap.error("--out is required (or --render)")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_gpu_enable_command_buffer=").strip()
    import jax
    import torch

    rows = []
    for text in args.shapes.split(","):
        shape = tuple(int(v) for v in text.lower().split("x"))
        print(f"== {shape}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        rows.append(run_shape(shape, args))
        print(page.summary(rows[-1]) + f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    data = {"benchmark": "quack_mlp",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(0), "nvidia_smi": nvidia_smi(),
            "command": " ".join(["python3 -m bench.quack_mlp.run"] + sys.argv[1:]),
            "versions": {"python": platform.python_version(), "jax": jax.__version__,
                         "torch": torch.__version__,
                         **versions(("jaxlib", "cutecall", "quack-kernels",
                                     "nvidia-cutlass-dsl"))},
            "args": vars(args), "rows": rows}
    write_json(args.out, data)
    md = args.page or os.path.join(os.path.dirname(os.path.abspath(args.out)), "quack_mlp.md")
    with open(md, "w") as f:
        f.write(page.render(data))
    print(f"wrote {md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
