"""Attention, side by side in one process: FlashAttention-4 from JAX through
cutecall, fa4-jax (FA4's kernels through cutejax), FA4's own torch path, and
``jax.nn.dot_product_attention`` with the cuDNN and the XLA
implementations (``paths.py`` says exactly what each path calls).

Three sets of shapes (``shapes.py``), bf16: ``dense`` (16k tokens per
batch, B = 16384 / S, hidden 2048, H = 2048 / D), ``varlen`` (ragged
lengths between S/4 and S packed into 16k tokens, through cu_seqlens; cuDNN
and XLA on the zero-padded batch with sequence lengths) and ``decode``
(S_q = 1 or 8 new tokens against S_k cached ones, GQA; cutecall and FA4
torch on a paged KV cache, the others on a plain one). Forward and
forward + backward (decode: forward).

Timing is device time. JAX paths: a JAX profiler trace of a chain of K
calls in one ``jit``, first kernel's start to last kernel's end, divided by
K, best of the trials (``bench/timing.py``). FA4's torch path: CUDA events
around K back-to-back calls, best of the trials. TFLOP/s count 4·H·Sq·Sk·D
per sequence for the forward (half when causal), 3.5 times that for
forward + backward; decode rows add tokens/s and the KV cache's read
bandwidth. A path that fails records its error and the sweep goes on;
the JSON is rewritten after every shape, so a run cut short keeps its rows.

  python -m bench.attention.run --out attention.json           (everything)
  python -m bench.attention.run --out a.json --sets dense --dims 128
  python -m bench.attention.run --out q.json --quick           (one shape per set)
  python -m bench.attention.run --profile d128-s2048-causal --out p.json  (kernel_profile.py)
  python -m bench.attention.run --dry-run                      (the plan, no GPU)
  python -m bench.attention.run plot attention.json --png bench/results/attention.png --md t.md

``--budget SECONDS`` records the cells that would start later as skipped
(a detached run, ``tools/gpu/gpu bg attention``, must end before the
machine is given back).

The part ``plot`` (``bench/attention/plot.py``) draws the figure and the
tables of results.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import sys
import time
import traceback

from bench.attention import plot
from bench.attention import shapes as S
from bench.attention.paths import PATHS, jax_call, jax_inputs, torch_call, torch_inputs
from bench.timing import jax_trace_best_us, torch_device_us

QUICK = dict(sets="dense,varlen,decode", dims="128", causal="1", seqlens="2048",
             varlen_seqlens="4096", decode_batches="32", decode_seqlens="8192",
             decode_queries="1", trials=2)
PROFILE_PATHS = ("cutecall", "fa4_jax", "fa4_torch")
PARTS = {"plot": plot.main}


def ints(text: str) -> list:
    return [int(x) for x in text.split(",") if x]


def plan(args) -> list:
    sets = args.sets.split(",")
    for s in sets:
        if s not in S.SETS:
            raise ValueError(f"--sets: no set {s!r} (sets: {', '.join(S.SETS)})")
    causals = [bool(c) for c in ints(args.causal)]
    out = []
    if "dense" in sets:
        out += S.dense_shapes(ints(args.dims), causals, ints(args.seqlens))
    if "varlen" in sets:
        out += S.varlen_shapes(ints(args.dims), causals,
                               ints(args.varlen_seqlens), args.seed)
    if "decode" in sets:
        h, hkv = ints(args.decode_heads.replace(":", ","))
        out += S.decode_shapes(args.decode_dim, h, hkv, ints(args.decode_batches),
                               ints(args.decode_seqlens), ints(args.decode_queries),
                               args.page_size)
    return out


def print_plan(shapes, paths) -> None:
    cells = sum(len(s.modes) for s in shapes) * len(paths)
    print(f"{len(shapes)} shapes, {cells} cells (shape x pass x path); paths: {', '.join(paths)}")
    for s in shapes:
        extra = f" lengths {list(s.lengths)}" if s.lengths else ""
        print(f"  {s.label()}  [{', '.join(s.modes)}]{extra}")


def measure(shape, args, deadline) -> list:
    """One row per pass and path of the shape: µs (and TFLOP/s; decode:
    tokens/s and KV GB/s), or the error; cells past the deadline skipped."""
    expired = lambda: deadline is not None and time.monotonic() > deadline  # noqa: E731
    x = t = None
    if not expired():
        padded = shape.set == "varlen" and {"cudnn", "xla"} & set(args.paths)
        x = jax_inputs(shape, padded=bool(padded))
        t = torch_inputs(x) if "fa4_torch" in args.paths else None
    rows = []
    for mode in shape.modes:
        for path in args.paths:
            row = dict(shape.record(), mode=mode, path=path)
            if shape.set == "decode":
                row["kv"] = "paged" if path in ("cutecall", "fa4_torch") else "plain"
            try:
                if x is None or expired():
                    raise TimeoutError("skipped: --budget spent")
                if path == "fa4_torch":
                    fn = torch_call(shape, mode, t)
                    for _ in range(2):  # compile, warm up
                        fn()
                    us = min(torch_device_us(fn, args.calls) for _ in range(args.trials))
                else:
                    fn, fargs = jax_call(path, shape, mode, x)
                    us = jax_trace_best_us(fn, fargs, args.calls, args.trials)[0]
                row.update(us=us, tflops=shape.flops(mode) / us / 1e6)
                if shape.set == "decode":
                    row.update(tokens_per_s=shape.batch * shape.seqlen_q / us * 1e6,
                               kv_gbps=shape.kv_bytes() / us / 1e3)
            except Exception as e:  # noqa: BLE001 (recorded, the sweep goes on)
                row.update(error=f"{type(e).__name__}: {' '.join(str(e).split())[:300]}")
                if not isinstance(e, TimeoutError):
                    traceback.print_exc(limit=2, chain=False)
            rows.append(row)
            shown = f"{row['us']:9.1f} us {row['tflops']:6.1f} TFLOP/s" if "us" in row \
                else row["error"][:70]
            print(f"{shape.label()} {mode:7s} {path:9s} {shown}", flush=True)
    del x, t
    gc.collect()
    return rows


def versions(paths) -> dict:
    import jax
    import torch
    from importlib.metadata import PackageNotFoundError, version

    if "fa4_jax" in paths:
        try:
            from paths import import_fa4_jax
            import_fa4_jax()
        except Exception as e:  # noqa: BLE001 (the rows say it too)
            print(f"fa4_jax does not import: {e}", flush=True)
    out = {"python": platform.python_version(), "jax": jax.__version__,
           "torch": torch.__version__}
    for dist in ("jaxlib", "cutecall", "flash-attn-4", "nvidia-cutlass-dsl", "fa4-jax",
                 "cutejax", "jax-tvm-ffi", "apache-tvm-ffi"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in PARTS:
        return PARTS[argv[0]](argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.attention.run",
                                 description=__doc__.split("\n\n")[0],
                                 epilog="part: plot FILES... [--png X.png] [--md X.md] "
                                        "(python -m bench.attention.run plot --help)")
    ap.add_argument("--out", help="the JSON to write (required unless --dry-run)")
    ap.add_argument("--sets", default="dense,varlen,decode")
    ap.add_argument("--paths", help=f"default: {','.join(PATHS)}; "
                    f"with --profile: {','.join(PROFILE_PATHS)}")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--varlen-seqlens", default="1024,4096,16384")
    ap.add_argument("--seed", type=int, default=0, help="varlen lengths")
    ap.add_argument("--decode-dim", type=int, default=128)
    ap.add_argument("--decode-heads", default="32:8", help="H:Hkv")
    ap.add_argument("--decode-batches", default="8,64")
    ap.add_argument("--decode-seqlens", default="4096,32768", help="S_k")
    ap.add_argument("--decode-queries", default="1,8", help="S_q")
    ap.add_argument("--page-size", type=int, default=128)
    ap.add_argument("--calls", type=int, default=5, help="calls per timed chain")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds; cells that would start later are recorded as skipped")
    ap.add_argument("--quick", action="store_true",
                    help="one shape per set, a few minutes (mostly compiles): " + str(QUICK))
    ap.add_argument("--dry-run", action="store_true", help="print the plan; no GPU")
    ap.add_argument("--profile", metavar="SHAPE",
                    help="per-kernel device time of one dense shape, e.g. d128-s2048-causal")
    ap.add_argument("--profile-mode", default="fwd_bwd", choices=("fwd", "fwd_bwd"))
    args = ap.parse_args(argv)
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    args.paths = (args.paths or ",".join(PROFILE_PATHS if args.profile else PATHS)).split(",")
    for p in args.paths:
        if p not in PATHS:
            ap.error(f"--paths: no path {p!r} (paths: {', '.join(PATHS)})")
    try:
        shapes = [S.parse_profile(args.profile)] if args.profile else plan(args)
    except ValueError as e:
        ap.error(str(e))
    if args.dry_run:
        if args.profile:
            print(f"profile: {shapes[0].label()} {args.profile_mode}; paths: "
                  f"{', '.join(args.paths)}")
        else:
            print_plan(shapes, args.paths)
        return
    if not args.out and not args.profile:
        ap.error("--out is required (or --dry-run)")
    # XLA's command buffers re-record a chain's graph every run (a cost of
    # the harness, not of a program): off, as in bench/external.
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_gpu_enable_command_buffer=").strip()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    meta = versions(args.paths)  # imports fa4_jax (and its jax_tvm_ffi) first
    import jax
    result = {"benchmark": "attention", "date": datetime.date.today().isoformat(),
              "started": started, "command": " ".join([sys.executable] + sys.argv),
              "device": jax.devices()[0].device_kind, "tokens": S.TOKENS,
              "hidden": S.HIDDEN, "dtype": "bfloat16", "calls": args.calls,
              "trials": args.trials, "versions": meta, "rows": []}
    if args.profile:
        from bench.attention.kernel_profile import profile
        result["profile"] = dict(shape=shapes[0].record(), mode=args.profile_mode,
                                 paths=profile(shapes[0], args.profile_mode, args.paths,
                                               args.calls))
    else:
        print_plan(shapes, args.paths)
        deadline = time.monotonic() + args.budget if args.budget else None
        for shape in shapes:
            result["rows"] += measure(shape, args, deadline)
            result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
            write(args.out, result)
    result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    if args.out:
        write(args.out, result)


def write(path: str, result: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
