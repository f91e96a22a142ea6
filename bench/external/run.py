"""Third-party kernels through cutecall against their authors' own paths.

One process. For every case of ``corpus`` (tests/external/corpus) (QuACK,
FlashAttention-4) at its bench size, side by side:

  cutecall_jax    ``cutecall.cutlass_call(<author's kernel>)`` inside
                  ``jax.jit``: K2 chained calls in one jit (each call's
                  inputs pass an optimization barrier with the previous
                  output, so XLA neither merges nor reorders them; every
                  output is a result). Device time per call from a JAX
                  profiler trace of one run: ``device_us`` is the span from
                  the first kernel's start to the last's end over K2 (as
                  CUDA events around K2 launches measure), ``busy_us`` the
                  kernels' summed durations over K2; ``wall_us`` is
                  (T(K2) - T(K1)) / (K2 - K1) of wall time. XLA's command
                  buffers are off in this process (``XLA_FLAGS``): with
                  every output live, XLA re-records each call's graph node
                  on every run, a cost of this harness, not of a program
  authors_jax     the authors' JAX path (QuACK's jax-tvm-ffi functions),
                  timed the same way
  xla             the case's plain-JAX reference, timed the same way (a
                  yardstick, not a target)
  cutecall_torch  ``cutecall.torch.kernel(<author's kernel>)(*args)``:
                  device time from CUDA events around N back-to-back
                  launches; host time per launch from the enqueue loop of
                  ``--host-launches`` launches (no synchronize inside)
  authors_torch   the authors' torch entry point, timed the same way

Trials are interleaved across paths; medians are reported (min in JSON).
Each path's first call compiles (excluded). Also recorded per case: what
cutecall compiled (the plan's dynamic extents and their classes, static
extents, the static-fallback rung, torch's static masks) and the largest
difference between cutecall's outputs and the authors'.

  python -m bench.external.run --out results.json [--cases softmax,fa4_fwd]
  python -m bench.external.run families --out families.json   (bench/external/families.py)
  python -m bench.external.run losses --out losses.json [--quick]   (bench/external/losses.py)
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
import traceback

from bench.external import families, losses
from bench.harness import use_corpus
from bench.report import versions
from bench.timing import jax_trace_us, jax_wall_us, split_arrays, torch_device_us, torch_host_us

PARTS = {"families": families.main, "losses": losses.main}


def describe_jax(call, args) -> dict:
    import jax
    from cutecall.jax import _compile
    from cutecall._driver.plan import decode_plan
    arrays, rebuild = split_arrays(args)
    eqn = _compile._find_call(
        jax.make_jaxpr(lambda *a: call(*rebuild(a)))(*arrays).jaxpr)
    kernel = eqn.params["kernel"]
    ops = decode_plan(kernel.plan)
    return {"kernel_sha256": kernel.sha256[:12],
            "static_fallback": call.launcher.static_dims,
            "operands": [{"name": n, "static": op["static"],
                          "dynamic": [(d, div) for d, div, _ in op["dynamic"]]}
                         for n, op in zip(kernel.operand_names.split(","), ops)]}


def tensor_leaves(x) -> list:
    """The torch tensors in `x`, a tensor or a container of them (tuples,
    NamedTuples, lists, dicts, dataclasses), in order."""
    import dataclasses

    import torch
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        x = [getattr(x, f.name) for f in dataclasses.fields(x)]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in tensor_leaves(v)]
    return []


def run_case(case, args) -> dict:
    import jax
    import numpy as np
    import torch

    import cutecall
    rec = {"name": case.name, "paths": {}, "errors": {}}
    timers = {}

    def guard(path, build):
        try:
            timers[path] = build()
        except Exception as e:  # record and go on: one path must not stop all
            rec["errors"][path] = f"{type(e).__name__}: {e}"[:2000]
            traceback.print_exc()

    before = cutecall.compile_stats()

    def cutecall_jax():
        call, jargs = case.jax(True, 0)
        rec["jax_compiled"] = describe_jax(call, jargs)
        return ("jax", call, jargs)
    guard("cutecall_jax", cutecall_jax)
    if case.authors_jax is not None:
        def authors_jax():
            _, jargs = case.jax(True, 0)
            return ("jax", case.authors_jax, jargs)
        guard("authors_jax", authors_jax)

    def xla():
        _, jargs = case.jax(True, 0)
        return ("jax", case.jax_reference, jargs)
    guard("xla", xla)

    targs = None

    def cutecall_torch():
        nonlocal targs
        k, targs = case.torch("cuda", 0)
        k(*targs)
        torch.cuda.synchronize()
        rec["torch_compiled"] = {"specializations": len(k.launch),
                                 "static_masks": k.static_masks}
        return ("torch", lambda: k(*targs))
    guard("cutecall_torch", cutecall_torch)
    if case.authors_torch is not None and targs is not None:
        def authors_torch():
            # An output may sit in a container (an epilogue's mAuxOut):
            # compare every tensor leaf of each output argument.
            ours = [t.clone() for i in case.torch_outputs for t in tensor_leaves(targs[i])]
            _, theirs_args = case.torch("cuda", 0)
            case.authors_torch(*theirs_args)
            torch.cuda.synchronize()
            theirs = [t for i in case.torch_outputs for t in tensor_leaves(theirs_args[i])]
            rec["max_abs_diff_vs_authors"] = max(
                float((a.float() - b.float()).abs().max()) for a, b in zip(ours, theirs))
            return ("torch", lambda: case.authors_torch(*theirs_args))
        guard("authors_torch", authors_torch)
    rec["compiles"] = cutecall.compile_stats()["compiles"] - before["compiles"]
    rec["static_fallbacks"] = (cutecall.compile_stats()["static_fallbacks"]
                               - before["static_fallbacks"])

    samples = {p: {"device_us": [], "busy_us": [], "wall_us": [],
                   "host_us": []} for p in timers}
    for _ in range(args.trials):
        for path, t in timers.items():
            try:
                if t[0] == "jax":
                    span, busy = jax_trace_us(t[1], t[2], args.k2)
                    samples[path]["device_us"].append(span)
                    samples[path]["busy_us"].append(busy)
                    samples[path]["wall_us"].append(
                        jax_wall_us(t[1], t[2], args.k1, args.k2))
                else:
                    samples[path]["device_us"].append(
                        torch_device_us(t[1], args.launches))
                    samples[path]["host_us"].append(
                        torch_host_us(t[1], args.host_launches))
            except Exception as e:
                rec["errors"][path] = f"{type(e).__name__}: {e}"[:2000]
    for path, s in samples.items():
        rec["paths"][path] = {
            k: {"median": statistics.median(v), "min": min(v), "all": v}
            for k, v in s.items() if v}
    del jax, np
    return rec


def table(results) -> str:
    def get(r, p, k="device_us"):
        v = r["paths"].get(p, {}).get(k)
        return v["median"] if v else None

    def fmt(v):
        return "—" if v is None else f"{v:.1f}"

    def ratio(a, b):
        return "—" if a is None or not b else f"{a / b:.3f}"
    lines = ["| kernel | cutecall JAX µs (busy) | authors JAX µs (busy) | "
             "cutecall torch µs | authors torch µs | XLA µs | JAX / authors | "
             "torch / authors torch | host µs cutecall torch | host µs authors "
             "torch |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        cj, aj, ct, at = (get(r, p) for p in ("cutecall_jax", "authors_jax",
                                             "cutecall_torch", "authors_torch"))
        cjb, ajb = get(r, "cutecall_jax", "busy_us"), get(r, "authors_jax", "busy_us")
        lines.append(
            f"| {r['name']} | {fmt(cj)} ({fmt(cjb)}) | {fmt(aj)} ({fmt(ajb)}) | "
            f"{fmt(ct)} | {fmt(at)} | {fmt(get(r, 'xla'))} | "
            f"{ratio(cj, aj or at)} | {ratio(ct, at)} | "
            f"{fmt(get(r, 'cutecall_torch', 'host_us'))} | "
            f"{fmt(get(r, 'authors_torch', 'host_us'))} |")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in PARTS:
        return PARTS[argv[0]](argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.external.run",
                                 description=__doc__.splitlines()[0],
                                 epilog="parts: families, losses (python -m "
                                        "bench.external.run PART --help)")
    ap.add_argument("--out", default="external.json")
    ap.add_argument("--size", default="bench", choices=["bench", "test"])
    ap.add_argument("--cases", default="", help="comma-separated substrings")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--k1", type=int, default=10)
    ap.add_argument("--k2", type=int, default=20)
    ap.add_argument("--launches", type=int, default=30)
    ap.add_argument("--host-launches", type=int, default=50)
    args = ap.parse_args(argv)

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_enable_command_buffer" not in flags:  # see the docstring
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_enable_command_buffer=").strip()
    import jax
    import torch

    import cutecall
    use_corpus()
    from corpus import (cudnn_bsa_corpus, cutlass_operators_corpus, fa4_combine_corpus,
                        fa4_corpus, fa4_flex_corpus, fa4_varlen_corpus, liger_corpus,
                        quack_corpus,
                        quack_allgather_corpus, quack_gemm_corpus, quack_hadamard_corpus,
                        quack_lce_corpus, quack_rotary_corpus)
    corpora = (quack_corpus, quack_gemm_corpus, quack_rotary_corpus, quack_lce_corpus,
               fa4_corpus, fa4_flex_corpus, fa4_combine_corpus,
               # the families (each needs its package: see pyproject's
               # `external` extra)
               liger_corpus, quack_hadamard_corpus, cutlass_operators_corpus,
               cudnn_bsa_corpus, quack_allgather_corpus, fa4_varlen_corpus)
    cases = [c for corpus in corpora for c in corpus.cases(args.size)]
    wanted = [w for w in args.cases.split(",") if w]
    cases = [c for c in cases if not wanted or any(w in c.name for w in wanted)]
    results = []
    for case in cases:
        print(f"== {case.name}", flush=True)
        start = time.perf_counter()
        results.append(run_case(case, args))
        print(f"   {time.perf_counter() - start:.1f} s, errors: "
              f"{list(results[-1]['errors'])}", flush=True)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "device": torch.cuda.get_device_name(0),
        "python": platform.python_version(), "jax": jax.__version__,
        "torch": torch.__version__, "cutecall": cutecall.__version__,
        "versions": versions((
            "nvidia-cutlass-dsl", "quack-kernels", "flash-attn-4",
            "apache-tvm-ffi", "jax-tvm-ffi", "jaxlib", "liger-kernel",
            "nvidia-cutlass-operators", "nvidia-cudnn-frontend")),
        "args": vars(args)}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
