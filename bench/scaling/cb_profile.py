#!/usr/bin/env python3
"""Why cutecall's FA4 step scales worse than cuDNN's under XLA's command
buffers (issue 35): the experiments of /work/notes/issue35_profile.md in one
run. For each (impl, GPUs) a child process times the data-parallel step with
XLA option variants (bench/scaling/chains.py: cold, alternating and steady),
counts cutecall's FFI execute-stage runs per step (0 when graphs replay
without re-recording), logs XLA's command-buffer record times (VLOG), takes
a JAX profiler trace with command buffers kept on, and dumps the optimized
HLO (command buffers and the custom calls in them).

  python bench/scaling/cb_profile.py --out $OUT            # on the GPU machine
  python bench/scaling/cb_profile.py --dry-run

Writes OUT/profile.json, OUT/profile.md and OUT/profile-raw.tar.gz (child
logs, traces, HLO).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import cb_parse  # noqa: E402

# XLA DebugOptions per variant, set per compile (compiler_options).
# "_feed": True times chains of dependent steps (each takes the previous
# weights) instead of the independent steps of the first numbers' harness.
VARIANTS = {
    "cb_on": {},
    "cb_on_fed": {"_feed": True},
    "cb_off": {"xla_gpu_enable_command_buffer": ""},
    "cb_no_custom_call": {"xla_gpu_enable_command_buffer":
                          "FUSION,CUBLAS,CUBLASLT,CUDNN,DYNAMIC_SLICE_FUSION"},
    "update_skip_temp": {"xla_gpu_command_buffer_update_mode": "SKIP_TEMP"},
    "trace_cache_64": {"xla_cmd_buffer_trace_cache_size": 64},
}
# (impl, gpus, variants, trace+dump)
PLAN = [("fa4_cutecall", 4, ["cb_on", "cb_off", "cb_no_custom_call", "update_skip_temp",
                             "cb_on_fed"], True),
        ("fa4_cudnn", 4, ["cb_on", "cb_off"], True),
        ("fa4_cutecall", 1, ["cb_on", "cb_off"], False)]
VLOG_ENV = {"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_MAX_VLOG_LEVEL": "0",
            "TF_CPP_VMODULE": "command_buffer_thunk=3"}


def mark(text: str) -> None:
    """A phase marker in the child's stderr, between XLA's VLOG lines."""
    print(f"=== {text} ===", file=sys.stderr, flush=True)


def child(args) -> int:
    import jax
    import steps
    import chains
    devices = jax.devices()[:args.gpus]
    if len(devices) < args.gpus:
        print(json.dumps({"error": f"{args.gpus} GPUs asked, {len(devices)} visible"}))
        return 0
    c = steps.case(args.impl, json.loads(args.sizes) if args.sizes else None)
    step, operands = steps.on_devices(c, devices)
    executes = chains.cutecall_executes if args.impl == "fa4_cutecall" else None
    result = {"impl": args.impl, "gpus": args.gpus, "variants": {}}
    for name in args.variants.split(","):
        mark(f"variant {name}")
        options = dict(VARIANTS[name])
        feed = options.pop("_feed", False)
        r = guarded(lambda: chains.measure(step, operands, k1=args.k1, k2=args.k2,
                                           options=options, executes=executes, feed=feed))
        mark(f"end {name}")
        if "error" in r:  # e.g. an option this jaxlib does not have
            result.setdefault("errors", {})[name] = r["error"]
            continue
        result["variants"][name] = r
        print(f"{args.impl} {args.gpus} GPU {name}: chain cold {r['cold_us']:.0f} us, alt "
              f"{r['alt_us']:.0f}, steady {r['warm_us']:.0f}; loop {r['loop_us']:.0f} us per "
              "step", file=sys.stderr, flush=True)
    if args.raw:
        mark("trace")
        result["trace"] = guarded(lambda: traced(step, operands, args))
        mark("dump")
        result["hlo"] = guarded(lambda: dumped(step, operands, args))
    print("RESULT=" + json.dumps(result))
    return 0


def guarded(fn) -> dict:
    """fn()'s dict, or {"error": ...}: one failing experiment keeps the others."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"[:1500]}


def traced(step, operands, args) -> dict:
    """A JAX profiler trace of executions 2 to 4 of a 4-step chain of
    independent steps (after a 2-step chain's compile and run, as in the
    alternating timing), command buffers kept on while profiling."""
    import jax
    import chains
    options = {"xla_enable_command_buffers_during_profiling": True}
    run = chains.compile_chain(step, operands, 4, options, feed=False)
    other = chains.compile_chain(step, operands, 2, options, feed=False)
    run(), other()
    folder = os.path.join(args.raw, f"trace-{args.impl}-{args.gpus}")
    jax.profiler.start_trace(folder)
    try:
        for _ in range(3):
            run()
    finally:
        jax.profiler.stop_trace()
    return cb_parse.summarize_trace(folder)


def dumped(step, operands, args) -> dict:
    """Command buffers and custom calls in the optimized HLO of a 2-step chain."""
    import chains
    folder = os.path.join(args.raw, f"hlo-{args.impl}-{args.gpus}")
    chains.compile_chain(step, operands, 2, {"xla_dump_to": folder})
    return cb_parse.count_hlo(folder)


def run_child(impl, gpus, variants, raw, args, log_dir, timeout) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--impl", impl,
           "--gpus", str(gpus), "--variants", ",".join(variants), "--k1", str(args.k1),
           "--k2", str(args.k2)]
    if raw:
        cmd += ["--raw", log_dir]
    log = os.path.join(log_dir, f"{impl}-{gpus}.log")
    env = dict(os.environ, **VLOG_ENV)
    t0 = time.time()
    with open(log, "w") as err:
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                               timeout=timeout)
            out, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc = "timeout"
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT=")]
    result = json.loads(lines[-1][7:]) if lines else {"impl": impl, "gpus": gpus,
                                                      "error": f"child rc {rc}"}
    result["seconds"] = round(time.time() - t0, 1)
    result["vlog"] = cb_parse.parse_vlog(log)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for profile.json, profile.md, profile-raw.tar.gz")
    ap.add_argument("--k1", type=int, default=2)
    ap.add_argument("--k2", type=int, default=8)
    ap.add_argument("--child-timeout", type=int, default=240)
    ap.add_argument("--budget", type=float, default=480,
                    help="seconds for all children; later ones are skipped past it")
    ap.add_argument("--only", help="comma-separated impl:gpus of PLAN to run")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl"), ap.add_argument("--gpus", type=int)
    ap.add_argument("--variants"), ap.add_argument("--raw")
    ap.add_argument("--sizes", help=argparse.SUPPRESS)  # JSON, smoke tests on CPU
    args = ap.parse_args()
    if args.child:
        return child(args)
    plan = [p for p in PLAN if not args.only or f"{p[0]}:{p[1]}" in args.only.split(",")]
    for impl, gpus, variants, raw in plan:
        print(f"plan: {impl} on {gpus} GPU(s): {', '.join(variants)}"
              + (" + trace + HLO" if raw else ""))
    if args.dry_run:
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run)")
    raw_dir = os.path.join(args.out, "profile-raw")
    os.makedirs(raw_dir, exist_ok=True)
    results, t0 = [], time.time()
    for impl, gpus, variants, raw in plan:
        left = args.budget - (time.time() - t0)
        if left < 45:
            results.append({"impl": impl, "gpus": gpus, "error": "skipped: --budget spent"})
            continue
        results.append(run_child(impl, gpus, variants, raw, args, raw_dir,
                                 min(args.child_timeout, left)))
        print(cb_parse.line(results[-1]), flush=True)
    doc = {"benchmark": "scaling/profile", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "command": " ".join(sys.argv), "k1": args.k1, "k2": args.k2,
           "variants": VARIANTS, "results": results}
    with open(os.path.join(args.out, "profile.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(args.out, "profile.md"), "w") as f:
        f.write(cb_parse.markdown(doc))
    with tarfile.open(os.path.join(args.out, "profile-raw.tar.gz"), "w:gz") as t:
        t.add(raw_dir, arcname="profile-raw")
    shutil.rmtree(raw_dir)  # the tarball holds it: few files come back from the device
    print(cb_parse.markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
