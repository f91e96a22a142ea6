"""The part ``families`` of ``bench/external/run.py``: kernel families
through cutecall against their authors' paths, one family per process:
Liger's CuTe DSL ops, QuACK's
Hadamard transform, the CUTLASS Operator API's Hopper GEMM, cuDNN's sm90
block-sparse attention, FA4's varlen scheduling helpers and block-sparsity
kernel, QuACK's all-gather GEMM kernel (one GPU, every shard arrived). The cases are the
corpus' (tests/external/corpus) at ``--size`` (default "bench"). For each:

  check           cutecall's torch front, the authors' torch path and
                  cutecall's JAX front (in ``jax.jit``) on the same inputs;
                  every output compared with the authors', bit for bit (as
                  float32) and by largest difference
  authors_torch   the authors' own torch path: CUDA events around
                  ``--launches`` back-to-back calls; host µs per call from
                  an enqueue loop
  cutecall_torch  ``cutecall.torch.kernel(<authors' object>)``, the same way
  cutecall_jax    ``cutecall.cutlass_call(<authors' object>)``: ``--k2``
                  calls chained in one jit keeping every output, device time
                  per call from a JAX profiler trace (bench/timing.py)

Trials are interleaved, each starting at another path, each path after
``--rest`` idle seconds (the GPU's state the same for all); medians are
reported. Compiles and the check run
first, outside ``--lock`` (a file: several families' processes compile at
once on one GPU and take turns to time). Each case's record is written as
it finishes (``DIR/<family>.json``, replaced whole), so a run cut off by
its time cap keeps what it measured; ``--budget`` seconds skips what would
start later.

  python -m bench.external.run families --out F.json      # every family, then F.json, F.md
  python -m bench.external.run families --family liger --out F.json [--lock L]  # one: F/liger.json
  python -m bench.external.run families --merge F.json     # F/*.json -> F.json, F.md
  python -m bench.external.run families --dry-run [--family F] [--size test]

``--dry-run`` needs no GPU: each case's JAX call lowered (its kernel
compiled for sm_90a) on the torch call's CPU inputs as the device run
builds them, and its torch launch object compiled on meta tensors.
"""

from __future__ import annotations

import datetime
import fcntl
import importlib
import json
import os
import platform
import statistics
import time
import traceback

from bench.external.families_report import summarize
from bench.harness import Deadline, short_error, use_corpus
from bench.report import nvidia_smi, versions

FAMILIES = {"liger": "liger_corpus", "hadamard": "quack_hadamard_corpus",
            "cutlass_operators": "cutlass_operators_corpus", "cudnn_bsa": "cudnn_bsa_corpus",
            "fa4_varlen": "fa4_varlen_corpus", "allgather": "quack_allgather_corpus",
            "fa4_block_sparsity": "fa4_block_sparsity_corpus"}
PATHS = ("authors_torch", "cutecall_torch", "cutecall_jax")
PACKAGES = ("nvidia-cutlass-dsl", "quack-kernels", "flash-attn-4", "liger-kernel",
            "nvidia-cutlass-operators", "nvidia-cudnn-frontend", "apache-tvm-ffi",
            "jax", "jaxlib", "torch")


def corpus_module(family: str):
    if family not in FAMILIES:
        raise ValueError(f"--family must be one of {sorted(FAMILIES)}, got {family!r}")
    use_corpus()
    return importlib.import_module(f"corpus.{FAMILIES[family]}")


def tensor_leaves(x) -> list:
    """The tensors in `x` (bench/external/run.py's ``tensor_leaves``)."""
    from bench.external.run import tensor_leaves as leaves
    return leaves(x)


def jit_call(call, jargs):
    """`call` in one jit over the array arguments (the others as they are)."""
    import jax

    from corpus import split_arrays
    arrays, rebuild = split_arrays(jargs)
    return jax.jit(lambda *a: call(*rebuild(a))), arrays


def prepare(case, module) -> tuple[dict, dict]:
    """Compiles and runs the three paths once on the same inputs; returns
    (the check's record, {path: timer}). A timer is ("torch", fn) or
    ("jax", call, args, output bytes). A path that fails is recorded in
    the check (``<path>_error``) and not timed; the others still are."""
    import torch
    k, targs = case.torch("cuda", 0)
    k(*targs)
    torch.cuda.synchronize()
    ours = [t.clone() for i in case.torch_outputs for t in tensor_leaves(targs[i])]
    check = {"torch_specializations": len(k.launch),
             "torch_output_params": list(getattr(k, "output_params", []) or [])}
    timers = {"cutecall_torch": ("torch", lambda: k(*targs))}
    theirs = None
    try:
        _, aargs = case.torch("cuda", 0)
        case.authors_torch(*aargs)
        torch.cuda.synchronize()
        theirs = [t.clone() for i in case.torch_outputs for t in tensor_leaves(aargs[i])]
        check["torch_vs_authors"] = summarize(zip(ours, theirs))
        timers = {"authors_torch": ("torch", lambda: case.authors_torch(*aargs)), **timers}
    except Exception as e:  # the authors' path: recorded, the others go on
        check["authors_torch_error"] = short_error(e, 2000)
        traceback.print_exc()
    try:
        timers["cutecall_jax"] = ("jax", *jax_check(case, module, targs, theirs, check))
    except Exception as e:
        check["cutecall_jax_error"] = short_error(e, 2000)
        traceback.print_exc()
    return check, timers


def jax_check(case, module, targs, theirs, check) -> tuple:
    """cutecall's JAX call on the torch call's inputs, once, in a jit; its
    outputs against the authors' (`theirs`, or None) into `check`. Returns
    (call, args, output bytes) for timing."""
    import jax
    call, _ = case.jax(False, 0)
    jargs = module.jax_args_from_torch(targs)
    f, arrays = jit_call(call, jargs)
    jout = jax.tree.leaves(jax.block_until_ready(f(*arrays)))
    if theirs is not None:
        layout = getattr(module, "as_jax_layout", None)
        check["jax_vs_authors"] = summarize(zip(jout, layout(theirs) if layout else theirs))
    out_bytes = int(sum(x.size * x.dtype.itemsize for x in jout))
    check["jax_output_bytes"] = out_bytes
    return (*flat_call(call, jargs), out_bytes)


def flat_call(call, jargs) -> tuple:
    """(a function of every array leaf of `jargs`, those leaves): the
    chain (bench/timing.py's ``jax_chain``) then passes arrays inside
    containers too (FA4's block-sparsity tuple, the all-gather flags)
    through its barrier, not as constants that XLA could merge across
    calls."""
    from corpus_checks import split_arrays as tree_split
    leaves, rebuild = tree_split(jargs)
    return (lambda *a: call(*rebuild(a))), tuple(leaves)


def time_paths(timers, args, deadline) -> tuple[dict, dict]:
    """Interleaved trials of every timer: ({path: {metric: stats}}, errors)."""
    from timing import jax_trace_us, torch_device_us, torch_host_us
    samples = {p: {"device_us": [], "busy_us": [], "host_us": []} for p in timers}
    errors = {}
    paths = list(timers)
    for trial in range(args.trials):
        if trial and deadline.left() < args.margin:
            break
        # Each trial starts at another path, and each path after a rest: a
        # path timed right after another's launch loop runs on a GPU that
        # loop heated (suspected in the large GEMMs' torch-front gap; see
        # gemm_gap.py).
        for path in paths[trial % len(paths):] + paths[:trial % len(paths)]:
            t = timers[path]
            if path in errors:
                continue
            torch_sync()
            time.sleep(args.rest)
            try:
                if t[0] == "jax":
                    span, busy = jax_trace_us(t[1], t[2], chain_length(t[3], args))
                    samples[path]["device_us"].append(span)
                    samples[path]["busy_us"].append(busy)
                else:
                    samples[path]["device_us"].append(torch_device_us(t[1], args.launches))
                    samples[path]["host_us"].append(torch_host_us(t[1], args.host_launches))
            except Exception as e:  # one path must not stop the others
                errors[path] = short_error(e, 2000)
                traceback.print_exc()
    stats = {p: {m: {"median": statistics.median(v), "min": min(v), "all": v}
                 for m, v in s.items() if v} for p, s in samples.items()}
    return stats, errors


def torch_sync() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def chain_length(out_bytes: int, args) -> int:
    """``--k2``, or fewer calls (at least 4) where the chain's kept outputs
    would pass ``--chain-gib`` (Liger's JSD at its bench size writes 1.5 GiB
    a call)."""
    fit = int(args.chain_gib * 2**30 // max(out_bytes, 1))
    return max(4, min(args.k2, fit))


class Lock:
    """An exclusive ``flock`` on `path` (None: no lock), for timing alone."""

    def __init__(self, path):
        self.path, self.fd = path, None

    def __enter__(self):
        if self.path:
            self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


def run_case(case, module, args, deadline) -> dict:
    import cutecall
    rec = {"name": case.name, "errors": {}}
    before = cutecall.compile_stats()["compiles"]
    t0 = time.perf_counter()
    try:
        rec["check"], timers = prepare(case, module)
    except Exception as e:
        rec["errors"]["prepare"] = short_error(e, 2000)
        traceback.print_exc()
        return rec
    rec["prepare_s"] = round(time.perf_counter() - t0, 1)
    rec["compiles"] = cutecall.compile_stats()["compiles"] - before
    with Lock(args.lock):
        t0 = time.perf_counter()
        rec["jax_chain"] = chain_length(rec["check"].get("jax_output_bytes", 0), args)
        rec["paths"], errors = time_paths(timers, args, deadline)
        rec["errors"].update(errors)
        rec["timing_s"] = round(time.perf_counter() - t0, 1)
    return rec


def write_json(path: str, data) -> None:
    """`data` to `path` whole: written beside it, then renamed over it."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def meta(args) -> dict:
    import jax
    import torch
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "nvidia_smi": nvidia_smi(), "python": platform.python_version(),
            "jax_backend": jax.default_backend(), "versions": versions(PACKAGES),
            "args": dict(vars(args))}


def run_family(args) -> int:
    deadline = Deadline(args.budget)
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_enable_command_buffer" not in flags:  # as bench/external/run.py
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_enable_command_buffer=").strip()
    module = corpus_module(args.family)
    folder = os.path.splitext(args.out)[0]
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{args.family}.json")
    doc = {"family": args.family, "meta": meta(args), "results": []}
    for case in module.cases(args.size):
        if deadline.expired():
            doc["results"].append({"name": case.name, "errors": {"all": "skipped: budget spent"}})
            continue
        print(f"== {case.name}", flush=True)
        rec = run_case(case, module, args, deadline)
        doc["results"].append(rec)
        write_json(path, doc)
        print(f"   {rec.get('prepare_s')} s + {rec.get('timing_s')} s, check "
              f"{rec.get('check', {}).get('torch_vs_authors')} / "
              f"{rec.get('check', {}).get('jax_vs_authors')}, errors {list(rec['errors'])}",
              flush=True)
    write_json(path, doc)
    return 0 if all(not r["errors"] and not any(k.endswith("_error") for k in r.get("check", {}))
                     for r in doc["results"]) else 1


def dry_run(args) -> int:
    """CPU: every case's arguments as the device run builds them, its JAX
    call lowered (compiled for sm_90a) on them, its torch object compiled
    on meta tensors, and the function the timing chains lowered on its
    array leaves; no GPU, no timing."""
    import jax
    import torch
    failed = 0
    for family in ([args.family] if args.family else FAMILIES):
        module = corpus_module(family)
        for case in module.cases(args.size):
            t0 = time.perf_counter()
            try:
                _, cpu_args = case.torch("cpu", 0)
                call, _ = case.jax(False, 0)
                jargs = module.jax_args_from_torch(cpu_args)
                f, arrays = jit_call(call, jargs)
                call.lower(*jargs)
                fn, leaves = flat_call(call, jargs)
                jax.jit(fn).trace(*leaves).lower(lowering_platforms=("cuda",))
                k, meta_args = case.torch("meta", 0)
                k.compile(*meta_args)
                outs = [t for i in case.torch_outputs for t in tensor_leaves(meta_args[i])]
                assert outs and all(isinstance(t, torch.Tensor) for t in outs), case.name
                print(f"ok   {family:18s} {case.name} ({time.perf_counter() - t0:.1f} s, "
                      f"{len(leaves)} JAX arrays, torch writes {k.output_params})", flush=True)
            except Exception as e:
                failed += 1
                print(f"FAIL {family:18s} {case.name}: {short_error(e)}", flush=True)
                traceback.print_exc()
    return 1 if failed else 0


def main(argv=None) -> int:
    from bench.external import families_report
    return families_report.main(run_family, dry_run, FAMILIES, argv)
