#!/usr/bin/env python3
"""Where the JAX front's time goes on issue 37's kernels (section 2).

For each case (``tests/external/corpus``, the shapes and calls
``bench/external/run.py`` times), one process, one GPU:

  jax_chain      k calls of ``cutecall.cutlass_call`` in one jit, every
                 output a result (``timing.jax_chain``, as run.py times it);
                 a JAX profiler trace of one run read with
                 ``jax.profiler.ProfileData``: every GPU event per call
                 (kernels, copies, memsets), span / busy / idle per call,
                 the largest gap; and the wall time per call
  jax_loop       the jitted call k times from Python, outputs freed (the
                 allocator hands the same buffers back): the kernel's time
                 when it writes where it wrote before
  xla_chain/loop XLA's own elementwise op on the largest array, the same two
                 ways: what keeping k outputs costs an XLA op
  jax_static     (``--static``) the same call with every extent compiled in
  authors_torch  the authors' torch path: CUDA events around ``--launches``
                 launches on one set of outputs, the same with k output sets
                 in rotation (fresh outputs each call, as the chain writes
                 them), and its kernels from ``torch.profiler``
  cutecall_torch (``--torch-front``) cutecall's torch front, the same way

Writes ``<out>/jaxprof.json`` after every case and ``<out>/jaxprof.md`` at
the end (``profile_report``). A case that would start past ``--budget``
seconds is skipped. ``--dry-run`` (CPU): lowers each case's chain for CUDA
and counts its ops (custom calls, copies, transposes, broadcasts), no timing.

  python bench/external/jax_profile.py --out $OUT/jaxprof [--cases fwd_combine]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import itertools
import json
import os
import pkgutil
import re
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from harness import CORPUS_PARENT, use_corpus  # noqa: E402
from profile_report import analyze, host_summary, markdown  # noqa: E402
from timing import (chain_wall_us, jax_chain, split_arrays,  # noqa: E402
                    torch_device_us, trace_events)

# Issue 37's six kernels (and FA4's dense forward), from the corpus and
# profile_cases (local window, varlen+GQA); a name matching no case is
# listed as skipped.
DEFAULT_CASES = ("quack.topk_fwd", "fa4.fwd_combine", "fa4.fwd_flex", "fa4.fwd_local",
                 "fa4.fwd_varlen_gqa", "cutlass_operators.gemm", "fa4.fwd_sm90[")
HLO_OPS = ("custom_call", "multiply", "copy", "transpose", "broadcast", "optimization_barrier",
           "dynamic_slice", "dynamic_update_slice", "convert")


def corpus_cases(size: str, wanted) -> tuple[list, list]:
    """(the corpus' cases whose names contain one of `wanted`, the wanted
    names no case matches). Every ``*_corpus`` module is asked; one whose
    package is missing here is passed over."""
    use_corpus()
    cases = []
    for info in pkgutil.iter_modules([str(CORPUS_PARENT / "corpus")]):
        if info.name.endswith("_corpus"):
            try:
                cases += importlib.import_module(f"corpus.{info.name}").cases(size)
            except Exception as e:  # a family whose package is absent
                print(f"   corpus.{info.name}: {type(e).__name__}: {e}", flush=True)
    try:  # FA4's local-window and varlen+GQA forwards (not corpus cases)
        import profile_cases
        cases += profile_cases.cases(size)
    except Exception as e:
        print(f"   profile_cases: {type(e).__name__}: {e}", flush=True)
    rank = {c.name: min(i for i, w in enumerate(wanted) if w in c.name)
            for c in cases if any(w in c.name for w in wanted)}
    chosen = sorted((c for c in cases if c.name in rank), key=lambda c: rank[c.name])
    missing = [w for w in wanted if not any(w in c.name for c in cases)]
    return chosen, missing


def largest(arrays):
    return max(arrays, key=lambda a: a.size * a.dtype.itemsize)


def xla_op(args):
    """XLA's own op of similar size: the largest array times 2, a call with
    the case's arguments (for ``jax_chain``)."""
    arrays, _ = split_arrays(args)
    index = next(i for i, a in enumerate(arrays) if a is largest(arrays))
    pos = [i for i, a in enumerate(args) if hasattr(a, "shape")][index]
    return lambda *full: full[pos] * 2


def jax_loop(call, args, k: int) -> dict:
    import jax
    arrays, rebuild = split_arrays(args)
    f = jax.jit(lambda *a: call(*rebuild(a)))
    jax.block_until_ready(f(*arrays))

    def run():
        out = None
        for _ in range(k):
            out = f(*arrays)  # the previous call's outputs are freed here
        jax.block_until_ready(out)
    run()
    return _traced(run, k)


def _traced(run, k: int) -> dict:
    """``analyze`` of one traced run of `run`, with its host summary."""
    gpu, host = trace_events(run)
    rec = analyze(gpu, k)
    rec["host"] = host_summary(host, k)
    return rec


def compiled_ops(run) -> dict:
    """Ops of a chain's optimized HLO (as compiled for this GPU), by kind:
    copies, custom calls, fusions, transposes an HLO pass might add."""
    text = run.jitted.lower(*run.arrays).compile().as_text()
    ops: dict[str, int] = {}
    for m in re.finditer(r"\s(copy|copy-start|custom-call|fusion|transpose|broadcast|"
                         r"dynamic-slice|dynamic-update-slice|opt-barrier)\(", text):
        ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    return ops


def jax_chain_profile(call, args, k: int, keep: dict | None = None) -> dict:
    """The chain's trace, optimized-HLO ops and wall µs per call; its
    compiled runners (k and k/2 calls) go into `keep` for later trials."""
    run, short = jax_chain(call, args, k), jax_chain(call, args, max(1, k // 2))
    run(), short()
    rec = _traced(run, k)
    try:
        rec["optimized_hlo_ops"] = compiled_ops(run)
    except Exception as e:  # a count, never a reason to lose the timing
        rec["optimized_hlo_ops"] = f"{type(e).__name__}: {e}"[:300]
    rec["wall_us"] = chain_wall_us(short, run, max(1, k // 2), k)
    if keep is not None:
        keep["chain"] = (run, short)
    return rec


def interleaved(keep: dict, authors, k: int, launches: int, trials: int) -> dict:
    """`trials` rounds of: the JAX chain's span (a trace) and wall µs per
    call, then the authors' CUDA-event µs -- one after the other, so drift
    of the GPU's clocks or a neighbour's load hits both alike. Medians and
    every value."""
    rows: dict[str, list] = {"jax_span_us": [], "jax_wall_us": [], "authors_events_us": []}
    run, short = keep["chain"]
    for _ in range(trials):
        rows["jax_span_us"].append(analyze(trace_events(run)[0], k)["span_us"])
        rows["jax_wall_us"].append(chain_wall_us(short, run, max(1, k // 2), k))
        if authors is not None:
            rows["authors_events_us"].append(torch_device_us(authors, launches))
    return {key: {"median": statistics.median(v), "all": v} for key, v in rows.items() if v}


def static_variant(call):
    import cutecall
    return cutecall.cutlass_call(
        call.fn, output_shape_dtype=call.output_shape_dtype, input_spec=call.input_spec,
        output_spec=call.output_spec, output_params=call.output_params,
        use_static_tensors=True, name=f"{call.name}_static",
        **dict(call.launcher.constexprs))


def torch_profile(fn, targs, outputs, k: int, launches: int,
                  profiler: bool = False) -> dict:
    """CUDA-event µs on one output set and on k in rotation, and (profiler)
    the kernels of k calls under torch.profiler. Kineto keeps CUPTI
    subscribed afterwards, so every later JAX trace in the process fails
    (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED): off by default."""
    import torch
    from timing import torch_kernel_table
    fn(*targs)
    torch.cuda.synchronize()
    rec = {"events_us": torch_device_us(lambda: fn(*targs), launches)}
    sets = []
    for _ in range(k):
        a = list(targs)
        for i in outputs:
            if isinstance(a[i], torch.Tensor):
                a[i] = torch.empty_like(a[i])
        sets.append(a)
    cycle = itertools.cycle(sets)
    rec["rotated_us"] = torch_device_us(lambda: fn(*next(cycle)), launches)
    if not profiler:
        return rec
    table = torch_kernel_table(lambda: fn(*targs), k)
    rec.update(busy_us=table["busy_us"], span_us=table["span_us"],
               kernels=table["kernels"], copies=[])
    return rec


def profile_case(case, args) -> dict:
    rec = {"name": case.name, "errors": {}}

    def guard(key, fn):
        try:
            rec[key] = fn()
        except Exception as e:  # one path must not stop the others
            rec["errors"][key] = f"{type(e).__name__}: {e}"[:2000]
            traceback.print_exc()

    from run import describe_jax
    call, jargs = case.jax(True, 0)
    keep: dict = {}
    guard("jax_compiled", lambda: describe_jax(call, jargs))
    guard("jax_chain", lambda: jax_chain_profile(call, jargs, args.k, keep))
    guard("jax_loop", lambda: jax_loop(call, jargs, args.k))
    op = xla_op(jargs)
    guard("xla_chain", lambda: jax_chain_profile(op, jargs, args.k))
    guard("xla_loop", lambda: jax_loop(op, jargs, args.k))
    if args.static:
        guard("jax_static", lambda: jax_loop(static_variant(call), jargs, args.k))
    call = jargs = op = None  # the JAX arrays go before torch allocates
    try:
        kernel, targs = case.torch("cuda", 0)
    except Exception as e:
        rec["errors"]["torch_args"] = f"{type(e).__name__}: {e}"[:2000]
        return rec
    if case.authors_torch is not None:
        guard("authors_torch", lambda: torch_profile(
            case.authors_torch, targs, case.torch_outputs, args.k, args.launches,
            args.torch_profiler))
    if args.torch_front:
        guard("cutecall_torch", lambda: torch_profile(
            kernel, targs, case.torch_outputs, args.k, args.launches,
            args.torch_profiler))
    if "chain" in keep and args.trials > 0:
        authors = None if "authors_torch" not in rec else (
            lambda: case.authors_torch(*targs))
        guard("interleaved", lambda: interleaved(keep, authors, args.k, args.launches,
                                                 args.trials))
    return rec


def dry_run(case) -> dict:
    """CPU: the case's 2-call chain (``timing.jax_chain``, as timed) and the
    XLA op's, lowered for CUDA, their ops counted."""
    rec = {"name": case.name}
    import jax
    import jax.numpy as jnp
    call, jargs = case.jax(False, 0)
    # Arrays inside containers (FA4's AuxData) are constants of the chain
    # (timing.split_arrays passes top-level arrays): give them values.
    jargs = tuple(a if hasattr(a, "shape") else jax.tree.map(
        lambda x: jnp.zeros(x.shape, x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else x, a)
        for a in jargs)
    for key, fn in (("jax_chain", call), ("xla_chain", xla_op(jargs))):
        run = jax_chain(fn, jargs, 2)
        text = run.jitted.trace(*run.arrays).lower(lowering_platforms=("cuda",)).as_text()
        ops = {op: len(re.findall(rf"stablehlo\.{op}\b", text)) for op in HLO_OPS}
        ops["func_calls"] = len(re.findall(r"\bcall @", text))
        rec[key] = {"hlo_ops": ops,
                    "layouts": re.findall(r"(?:operand|result)_layouts = \[[^\]]*\]", text)[:4],
                    "output_operand_aliases": text.count("output_operand_aliases")}
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "jaxprof"))
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--size", default="bench", choices=["bench", "test"])
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--launches", type=int, default=40)
    ap.add_argument("--trials", type=int, default=3,
                    help="interleaved rounds of JAX chain and authors' events")
    ap.add_argument("--budget", type=float, default=200.0, help="seconds; no case starts after")
    ap.add_argument("--static", action="store_true", help="also time the all-static compile")
    ap.add_argument("--torch-front", action="store_true", help="also cutecall's torch front")
    ap.add_argument("--dry-run", action="store_true", help="CPU: lower and count, no timing")
    ap.add_argument("--torch-profiler", action="store_true",
                    help="the authors' kernels under torch.profiler too (one case a "
                         "process: JAX traces fail after it)")
    args = ap.parse_args()
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_enable_command_buffer" not in flags:  # as run.py times
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_enable_command_buffer=").strip()
    t0 = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    cases, missing = corpus_cases(args.size, [w for w in args.cases.split(",") if w])
    import jax
    doc = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    "jax": jax.__version__, "k": args.k, "args": vars(args),
                    "xla_flags": os.environ["XLA_FLAGS"]},
           "results": [], "skipped": [f"{w}: no such case in the corpus" for w in missing]}
    if not args.dry_run:
        import torch
        doc["meta"].update(torch=torch.__version__, device=torch.cuda.get_device_name(0)
                           if torch.cuda.is_available() else "no CUDA device",
                           env={k: os.environ.get(k) for k in (
                               "CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_PREALLOCATE")})
    for case in cases:
        if time.monotonic() - t0 > args.budget:
            doc["skipped"].append(f"{case.name}: budget spent")
            continue
        print(f"== {case.name} ({time.monotonic() - t0:.0f} s)", flush=True)
        try:
            doc["results"].append(dry_run(case) if args.dry_run else profile_case(case, args))
        except Exception as e:
            traceback.print_exc()
            doc["results"].append({"name": case.name, "errors": {"case": f"{type(e).__name__}: {e}"}})
        _write(os.path.join(args.out, "jaxprof.json"), doc)
    _write(os.path.join(args.out, "jaxprof.json"), doc)
    if args.dry_run:
        print(json.dumps(doc["results"], indent=1))
        return 0
    page = markdown(doc)
    with open(os.path.join(args.out, "jaxprof.md"), "w") as f:
        f.write(page)
    print(page)
    return 0


def _write(path: str, doc: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
