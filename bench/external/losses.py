"""The part ``losses`` of ``bench/external/run.py``: the kernels cutecall
lost on, reproduced (tests/external/corpus/repro_corpus.py: a per-shape
SIMT layernorm, an f16 gate over (n/8, 8) views, QuACK's TopK and its
640-wide Hadamard transform), every path side by side in one process:

  authors_torch          the authors' own compile per shape and their
                         launch (ours: static layouts, TVM-FFI; QuACK's:
                         ``_topk_fwd``, ``_hadamard_transform_fwd``)
  cutecall_torch         ``cutecall.torch.kernel(obj)``, default specs
  cutecall_torch_static  the same with ``static=True`` (every extent in)
  cutecall_jax           ``cutecall.cutlass_call(obj)``: ``--k2`` calls in
                         one jit, every output kept (``bench.timing``'s
                         chain, as the part ``families`` times)
  cutecall_jax_static    the same with ``use_static_tensors=True``
  cutecall_jax_feed      the default call chained with each output fed to
                         the next call's input of its shape, nothing else
                         kept: XLA reuses two buffers, as a program's
                         layers do (cases with such an input only)
  xla                    the case's plain-JAX reference, chained (a
                         yardstick)

Per torch path: ``device_us`` (CUDA events around ``--launches``
launches), ``busy_us`` and the kernels with their grid, block and
registers (``torch.profiler``), ``host_us`` (enqueue loop). Per JAX path:
``span_us`` and ``busy_us`` per call and every GPU event per call with its
launch configuration, from one profiler trace of the chain
(``losses_profile``); with ``--profile-dir`` also the chain's optimized HLO
(``<case>/<path>.hlo.txt``: copies or transposes XLA put around the
custom call) and the traces. Trials are interleaved (medians). Also per
case: what each cutecall path compiled in (``plan``), and the outputs'
largest difference from the authors'. XLA's command buffers are off, as in
``run.py``. ``--device-code`` (no GPU needed) compares each path's
compiled device code with the authors' instead (``device_code.py``).

  python -m bench.external.run losses --out L.json [--quick] [--cases topk]
  python -m bench.external.run losses --device-code [--size test]
  python -m bench.external.run losses --dry-run
  python -m bench.external.run losses --report L.json   (its tables again)
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

from bench.harness import short_error, use_corpus
from bench.report import versions

TORCH_PATHS = ("authors_torch", "cutecall_torch", "cutecall_torch_static")
JAX_PATHS = ("cutecall_jax", "cutecall_jax_static", "cutecall_jax_feed", "xla")
PACKAGES = ("nvidia-cutlass-dsl", "quack-kernels", "apache-tvm-ffi", "jax", "jaxlib",
            "torch")


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.external.run losses",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="losses.json")
    ap.add_argument("--size", default="bench", choices=["bench", "test"])
    ap.add_argument("--cases", default="", help="comma-separated substrings")
    ap.add_argument("--paths", default="", help="comma-separated paths (default all)")
    ap.add_argument("--quick", action="store_true",
                    help="1 trial, 10 chained calls, 20 launches: every case in ~2 minutes")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--k2", type=int, default=20, help="calls per JAX chain")
    ap.add_argument("--launches", type=int, default=30)
    ap.add_argument("--host-launches", type=int, default=50)
    ap.add_argument("--profile-dir", default="",
                    help="keep each JAX chain's optimized HLO and the traces here")
    ap.add_argument("--device-code", action="store_true",
                    help="compare the compiled device code of every path (no GPU)")
    ap.add_argument("--dry-run", action="store_true",
                    help="list the cases and paths, compile nothing")
    ap.add_argument("--report", default="", metavar="JSON",
                    help="print the tables of an earlier run's JSON and exit")
    args = ap.parse_args(argv)
    if args.quick:
        args.trials, args.k2, args.launches, args.host_launches = 1, 10, 20, 20
    return args


def selected(size: str, cases: str) -> list:
    use_corpus()
    from corpus import repro_corpus
    wanted = [w for w in cases.split(",") if w]
    return [r for r in repro_corpus.repros(size)
            if not wanted or any(w in r.case.name for w in wanted)]


def _folder(root: str, case_name: str, path: str) -> str | None:
    if not root:
        return None
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in case_name)
    return os.path.join(root, safe, path)


def _plan(call_or_kernel, args, jax_side: bool) -> list:
    from bench.external.device_code import plan_summary
    if not jax_side:
        return plan_summary(call_or_kernel.compile(*args).plan)
    from bench.external.run import describe_jax
    return describe_jax(call_or_kernel, args)


def build_paths(repro, args, rec) -> dict:
    """{path: ("torch", fn) | ("jax", runner, k)} for the case, each
    compiled and run once; what fails is recorded in ``rec["errors"]``."""
    import torch

    from bench.external import losses_profile
    from bench.external.run import tensor_leaves
    from bench.timing import jax_chain
    case, wanted = repro.case, [p for p in args.paths.split(",") if p]
    paths, torch_out = {}, {}

    def guard(path, build):
        if wanted and path not in wanted:
            return
        try:
            built = build()
            if built is not None:
                paths[path] = built
        except Exception as e:  # record and go on: one path must not stop all
            rec["errors"][path] = short_error(e, 2000)
            traceback.print_exc()

    def torch_path(path, make):
        def build():
            k, targs = make("cuda", 0)
            fn = (lambda: case.authors_torch(*targs)) if path == "authors_torch" \
                else (lambda: k(*targs))
            fn()
            torch.cuda.synchronize()
            torch_out[path] = [t.clone() for i in case.torch_outputs
                               for t in tensor_leaves(targs[i])]
            if path != "authors_torch":
                rec["compiled"][path] = _plan(k, targs, False)
            return ("torch", fn)
        guard(path, build)

    def jax_path(path, make, chain):
        def build():
            call, jargs = make(True, 0)
            runner = chain(call, jargs)
            if runner is None:  # the path does not apply to this case
                return None
            runner()
            if path.startswith("cutecall"):
                rec["compiled"][path] = _plan(call, jargs, True)
            if args.profile_dir:
                folder = _folder(args.profile_dir, case.name, "")
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, f"{path}.hlo.txt"), "w") as f:
                    f.write(losses_profile.hlo_text(runner))
            return ("jax", runner)
        guard(path, build)

    torch_path("authors_torch", case.torch)
    torch_path("cutecall_torch", case.torch)
    torch_path("cutecall_torch_static", repro.torch_static)
    keep = lambda call, jargs: jax_chain(call, jargs, args.k2)  # noqa: E731
    jax_path("cutecall_jax", case.jax, keep)
    jax_path("cutecall_jax_static", repro.jax_static, keep)

    def feed(call, jargs):
        import jax

        from bench.timing import split_arrays
        arrays, rebuild = split_arrays(jargs)
        pairs = losses_profile.feedable(jargs, jax.eval_shape(
            lambda *a: call(*rebuild(a)), *arrays))
        if not pairs:  # no output has an input's shape and dtype
            return None
        rec["fed"] = pairs
        return losses_profile.feed_chain(call, jargs, args.k2, pairs)
    jax_path("cutecall_jax_feed", case.jax, feed)
    jax_path("xla", lambda c, s: (case.jax_reference, case.jax(c, s)[1]), keep)
    if "authors_torch" in torch_out:
        ref = torch_out["authors_torch"]
        rec["max_abs_diff_vs_authors"] = {
            p: max(float((a.float() - b.float()).abs().max()) for a, b in zip(out, ref))
            for p, out in torch_out.items() if p != "authors_torch"}
    return paths


def time_case(paths, args, rec) -> None:
    """Interleaved trials of every path; medians into ``rec["paths"]``."""
    from bench.external import losses_profile
    from bench.timing import torch_device_us, torch_host_us
    samples = {p: {} for p in paths}
    for trial in range(args.trials):
        for path, built in paths.items():
            keep = _folder(args.profile_dir, rec["name"], path) if trial == 0 else None
            s = samples[path]
            try:
                if built[0] == "jax":
                    prof = losses_profile.jax_profile(built[1], args.k2, keep)
                else:
                    fn = built[1]
                    s.setdefault("device_us", []).append(torch_device_us(fn, args.launches))
                    s.setdefault("host_us", []).append(torch_host_us(fn, args.host_launches))
                    prof = losses_profile.torch_profile(fn, args.launches, keep)
                s.setdefault("span_us", []).append(prof["span_us"])
                s.setdefault("busy_us", []).append(prof["busy_us"])
                rec["events"].setdefault(path, prof["events"])
            except Exception as e:
                rec["errors"][path] = short_error(e, 2000)
    for path, s in samples.items():
        rec["paths"][path] = {k: {"median": statistics.median(v), "min": min(v), "all": v}
                              for k, v in s.items() if v}


def run_case(repro, args) -> dict:
    import cutecall
    rec = {"name": repro.case.name, "authors_compile": repro.authors_compiles,
           "paths": {}, "errors": {}, "compiled": {}, "events": {}}
    before = cutecall.compile_stats()
    paths = build_paths(repro, args, rec)
    rec["compiles"] = cutecall.compile_stats()["compiles"] - before["compiles"]
    time_case(paths, args, rec)
    return rec


def device_code_main(args) -> int:
    from bench.external import device_code
    results = {}
    root = args.profile_dir or "device_code"
    for repro in selected(args.size, args.cases):
        start = time.perf_counter()
        results[repro.case.name] = device_code.compare(
            repro, _folder(root, repro.case.name, ""))
        print(f"== {repro.case.name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump({"device_code": results}, f, indent=1, default=str)
    print(device_code.table(results))
    return 0


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.report:
        from bench.external.losses_report import report
        return report(args.report)
    if args.dry_run:
        for repro in selected(args.size, args.cases):
            print(f"{repro.case.name}: authors compile {repro.authors_compiles}; paths "
                  f"{', '.join(p for p in TORCH_PATHS + JAX_PATHS if not args.paths or p in args.paths)}")
        return 0
    if args.device_code:
        return device_code_main(args)
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_enable_command_buffer" not in flags:  # as run.py: see its docstring
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_enable_command_buffer=").strip()
    import jax
    import torch

    from bench.external.losses_report import rows, table
    results, start = [], time.perf_counter()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "device": torch.cuda.get_device_name(0), "python": platform.python_version(),
            "jax": jax.__version__, "torch": torch.__version__, "versions": versions(PACKAGES),
            "args": vars(args)}
    for repro in selected(args.size, args.cases):
        print(f"== {repro.case.name}", flush=True)
        t = time.perf_counter()
        results.append(run_case(repro, args))
        print(f"   {time.perf_counter() - t:.1f} s, errors: {list(results[-1]['errors'])}",
              flush=True)
        meta["seconds"] = time.perf_counter() - start
        with open(args.out, "w") as f:  # after each case: a run cut off keeps what it timed
            json.dump({"meta": meta, "results": results, "rows": rows(results)}, f,
                      indent=1, default=str)
    print(table(results))
    return 0
