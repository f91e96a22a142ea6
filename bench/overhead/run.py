"""Launch-overhead and copy-bandwidth benchmark: cutecall against its peers.

One process measures, side by side, the cost of one custom call that launches
an EMPTY CuTe kernel (one f32[1024] input, one f32[1024] output, grid 1,
block 32) through five paths:

  cutecall      ``cutecall.cutlass_call(empty_launcher, ...)``
  handwritten   a hand-written XLA FFI handler (bench/overhead/handwritten_ffi.cu):
                decode the stream, launch ``<<<1, 32, 0, stream>>>``, check.
                The floor for any XLA custom call.
  handwritten_ex
                the same handler launching the way the CuTe DSL's generated
                host code does: ``cudaLaunchKernelEx`` with the launch
                attributes Cooperative = 0 and ProgrammaticStreamSerialization
                = 0, on a kernel given once (on first use) the maximum dynamic
                shared memory and non-portable cluster sizes with
                ``cudaFuncSetAttribute``. The floor for a DSL-style launch: the
                gap between it and ``handwritten`` is the launch style's, the
                gap between cutecall and it is cutecall's own.
  cutlass_jax   NVIDIA's ``cutlass.jax.cutlass_call(empty_launcher, ...)``
  tvm_ffi       the same launcher compiled by ``cute.compile(...,
                options="--enable-tvm-ffi")`` (stream from the TVM-FFI env
                stream) and registered with ``jax_tvm_ffi.register_ffi_target``

Every path comes as two targets: one that XLA may capture into a CUDA graph
(command buffer) and one that it may not (``allow_cuda_graph=False``; for the
hand-written handler, the variant without ``kCmdBufferCompatible``), except
``handwritten_ex``, which is graph-capable only.

Scenarios (microseconds per call, lower is better):

  unrolled    ``jax.jit`` of ``--unroll`` (200) calls chained output -> input,
              so XLA can neither drop, merge nor reorder them. Run with XLA's
              default flags, where command buffers are on, so graph-capable
              targets run as CUDA graphs.
  unrolled_donate
              the same chain jitted with ``donate_argnums=0``, each
              invocation's output fed back as the next one's input
              (``x = fn(x)``): XLA may put the output in the donated input's
              buffer, so buffer addresses can stay stable between executions.
              Graph-capable targets only, default flags.
  unrolled_cmdbuf_off
              the ``unrolled`` chain in a child process started with
              ``XLA_FLAGS=--xla_gpu_enable_command_buffer=`` (empty list: no
              command buffers at all). Only graph-capable targets run here;
              a no-graph target under default flags is the other way to see
              "no graph" (both are in the table).
  fori        ``lax.fori_loop`` of ``--fori`` (1000) chained calls in one jit;
              per-iteration time, so XLA's own while-loop overhead is included.
  fori_cmdbuf_off
              the same in the command-buffers-off child.
  eager       ``jax.jit(call)`` dispatched ``N`` times from Python back to
              back (async), one block at the end: host dispatch per call.

Timing: one trial is ``reps`` back-to-back invocations followed by
``block_until_ready`` on the last result (one stream, so the last result
finishing means all did), timed with ``time.perf_counter``. The time at which
the dispatch loop returned, before that block, is kept as well: ``dispatch_us``
is host dispatch per call, and a dispatch time close to the total means the
host, not the GPU, sets the pace. Before its trials every (target, scenario)
cell is compiled (its first invocation, timed as ``compile_s``), warmed up
(``--warmup`` invocations) and calibrated (``reps`` so that one trial lasts
about ``--trial-ms``). Per-call values are trial time / (``reps`` * calls per
invocation).

By default the trials are interleaved: every target of a scenario is built,
compiled, warmed up and calibrated first; then trial t runs one trial of each
target, in an order rotated to start at target t % n, so slow drifts (clocks,
host load, allocator state) hit all paths alike. ``--no-interleave`` times
each cell in a block of its own, path after path. ``--trials`` defaults to 15
interleaved, 7 in blocks. The table shows, per cell, the median and in
brackets the min of the trials; the JSON keeps every trial (total and
dispatch).

Execute counter: when ``cutecall._core`` has ``call_stats()`` (a dict of
counters, ``executes`` among them), it is read before and after every timed
trial of a cutecall target. ``executes_per_invocation`` is the ``executes``
delta over the timed trials divided by the invocations timed (the deltas of
all counters are kept as ``call_stats_delta``). With command buffers, 0 means
XLA replays its recorded graph without calling cutecall's execute handler; the
number of calls per invocation means the handler runs on every replay.

The run ends with cutecall / hand-written ratios (of the medians and of the
mins) for ``unrolled`` and ``unrolled_donate``, against both hand-written
variants.

Bandwidth: a 1 GiB (``--bw-gib``) f32 copy, input -> new output, through
cutecall, cutlass.jax and XLA's own elementwise kernel, GB/s counting read +
write, median over ``--bw-trials`` trials (``bandwidth.py`` says how).

A path that fails (import, build, compile, run) is recorded with its error
string and the run goes on. The whole run aims to finish in ``--budget-s``
seconds; measurements (and trials) that would start after that are skipped
and say so.

Usage (GPU machine: ``bash tools/gpu/gpu bench overhead`` after ``gpu setup``,
or after ``. /tmp/site/env.sh``):

    python3 -m bench.overhead.run --out $OUT/overhead.json

Without a GPU: ``--dry-run`` prints the tables from synthetic numbers;
``--lower-only`` builds every path (DSL compiles included; set
``CUTE_DSL_ARCH=sm_90a``) and lowers each scenario for CUDA, listing the
custom calls; ``--allow-cpu`` runs everything on the CPU backend (every GPU
path then records its error), which exercises the error handling.

Files: this one (options, the command-buffers-off child, metadata, main),
``config.py``, ``paths.py``, ``scenarios.py`` (the run over every cell),
``bandwidth.py``, ``lowering.py``, ``tables.py`` (the printed report); shared
with the other benchmarks: ``bench/harness.py`` (trials, statistics, budget,
child process), ``bench/report.py`` (versions, JSON, tables). Results:
``bench/results/overhead.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import platform
import sys
import time
import traceback
from typing import Any

from bench.overhead.bandwidth import run_bandwidth
from bench.overhead.config import (BLOCK_TRIALS, CHILD_SCENARIOS, CMDBUF_OFF, CMDBUF_OFF_FLAG,
                                   DEFAULT_HANDLER_SO, PARENT_SCENARIOS, PATHS, Config)
from bench.harness import (Deadline, check_backend, log, reply_to_parent, run_child,
                           short_error)
from bench.overhead.lowering import format_lowering_table, lower_only, lowering_failed
from bench.overhead.paths import Paths
from bench.report import nvidia_smi, versions, write_json
from bench.overhead.scenarios import cutecall_call_stats, merge_child, run_overhead
from bench.overhead.tables import format_report, synthetic_results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.overhead.run",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Config()
    p.add_argument("--out", default=None, help="write the JSON results here ('-' = stdout)")
    p.add_argument("--paths", default=",".join(PATHS),
                   help=f"comma-separated subset of {','.join(PATHS)}")
    p.add_argument("--n", type=int, default=d.n, help="elements of the f32 input/output")
    p.add_argument("--unroll", type=int, default=d.unroll, help="chained calls in one jit")
    p.add_argument("--fori", type=int, default=d.fori, help="lax.fori_loop iterations")
    p.add_argument("--trials", type=int, default=None,
                   help=f"trials per cell (default {d.trials}; {BLOCK_TRIALS} with --no-interleave)")
    p.add_argument("--no-interleave", action="store_true",
                   help="time each (target, scenario) in its own block of trials, path after path")
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--trial-ms", type=float, default=d.trial_ms, help="target length of one trial")
    p.add_argument("--bw-gib", type=float, default=d.bw_gib, help="size of the copied array")
    p.add_argument("--bw-trials", type=int, default=d.bw_trials)
    p.add_argument("--bw-reps", type=int, default=d.bw_reps, help="copies per bandwidth trial")
    p.add_argument("--no-bandwidth", action="store_true")
    p.add_argument("--no-cmdbuf-off", action="store_true",
                   help="skip the child process with command buffers off")
    p.add_argument("--budget-s", type=float, default=d.budget_s, help="stop starting work after this")
    p.add_argument("--child-timeout-s", type=float, default=d.child_timeout_s)
    p.add_argument("--handler-so", default=os.environ.get("CUTECALL_HANDWRITTEN_SO", DEFAULT_HANDLER_SO),
                   help="the built handwritten_ffi.cu (built on demand if missing or stale)")
    p.add_argument("--quick", action="store_true", help="fewer trials/iterations (smoke run)")
    p.add_argument("--dry-run", action="store_true", help="no JAX: print tables of synthetic numbers")
    p.add_argument("--allow-cpu", action="store_true", help="run even if JAX has no GPU")
    p.add_argument("--lower-only", action="store_true",
                   help="no GPU needed: build every path and lower each scenario for CUDA")
    p.add_argument("--child-cmdbuf-off", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    bad = [x for x in args.paths.split(",") if x and x not in PATHS]
    if bad:
        p.error(f"unknown path(s) {bad}; choose from {PATHS}")
    return args


def config_from_args(args: argparse.Namespace) -> Config:
    interleave = not args.no_interleave
    cfg = Config(
        n=args.n, unroll=args.unroll, fori=args.fori,
        trials=args.trials or (Config.trials if interleave else BLOCK_TRIALS), warmup=args.warmup,
        trial_ms=args.trial_ms, bw_gib=args.bw_gib, bw_trials=args.bw_trials,
        bw_reps=args.bw_reps, budget_s=args.budget_s, child_timeout_s=args.child_timeout_s,
        paths=tuple(x for x in args.paths.split(",") if x), handler_so=args.handler_so,
        bandwidth=not args.no_bandwidth, cmdbuf_off_child=not args.no_cmdbuf_off,
        interleave=interleave,
    )
    if args.quick:
        cfg.unroll, cfg.fori, cfg.trials, cfg.trial_ms = min(cfg.unroll, 50), min(cfg.fori, 200), 3, 15.0
        cfg.bw_trials, cfg.bw_reps = 3, 4
    return cfg


def child_argv(args: argparse.Namespace) -> list[str]:
    """The options a child must share with the parent."""
    out = ["--paths", args.paths, "--n", str(args.n), "--unroll", str(args.unroll),
           "--fori", str(args.fori), "--warmup", str(args.warmup),
           "--trial-ms", str(args.trial_ms), "--handler-so", args.handler_so]
    if args.trials:
        out += ["--trials", str(args.trials)]
    for flag in ("quick", "allow_cpu", "no_interleave"):
        if getattr(args, flag):
            out.append("--" + flag.replace("_", "-"))
    return out


def child_main(cfg: Config) -> int:
    """The command-buffers-off child: the graph-capable targets' ``unrolled``
    and ``fori`` cells, handed back to the parent."""
    deadline = Deadline(cfg.budget_s)
    paths = Paths(cfg)
    overhead = run_overhead(cfg, paths, CHILD_SCENARIOS, (True,), deadline, suffix=CMDBUF_OFF)
    reply_to_parent({"overhead": overhead, "XLA_FLAGS": os.environ.get("XLA_FLAGS")})
    return 0


def run_cmdbuf_off_child(cfg: Config, argv_base: list[str], deadline: Deadline) -> dict[str, Any]:
    """Re-run this benchmark with command buffers off; returns its overhead dict
    or ``{"error": ...}``."""
    budget = max(10.0, min(cfg.child_timeout_s, deadline.left()))
    return run_child("bench.overhead.run", ["--child-cmdbuf-off", "--budget-s", str(budget - 5), *argv_base],
                     xla_flag=CMDBUF_OFF_FLAG, timeout=budget, what="command buffers off")


def collect_meta(cfg: Config) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": sys.version.split()[0],
        "argv": sys.argv,
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "config": dataclasses.asdict(cfg),
        "nvidia_smi": nvidia_smi(),
        "versions": versions((
            "jax", "jaxlib", "jax-cuda13-plugin", "nvidia-cutlass-dsl",
            "nvidia-cutlass-dsl-libs-cu13", "cuda-bindings", "apache-tvm-ffi",
            "jax-tvm-ffi", "cutecall")),
        "cutecall_call_stats": cutecall_call_stats() is not None,
    }
    try:
        import jax

        dev = jax.devices()[0]
        meta["jax_backend"] = jax.default_backend()
        meta["device"] = f"{dev.platform}:{getattr(dev, 'device_kind', '?')}"
    except Exception as exc:  # noqa: BLE001
        meta["device"] = "unavailable: " + short_error(exc)
    return meta


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = config_from_args(args)
    if args.dry_run:
        data = synthetic_results(cfg)
        print(format_report(data, cfg))
        if args.out:
            write_json(args.out, data)
        return 0
    if args.child_cmdbuf_off:
        return child_main(cfg)
    if args.lower_only:
        paths = Paths(cfg)
        low = lower_only(cfg, paths)
        print(format_lowering_table(low))
        if args.out:
            write_json(args.out, {"meta": collect_meta(cfg), "lowering": low})
        return 1 if lowering_failed(low) else 0

    t_start = time.monotonic()
    deadline = Deadline(cfg.budget_s)
    problem = check_backend(args.allow_cpu)
    if problem:
        log(f"[bench] {problem}")
        return 2
    # The child runs while this process is idle; it does not preallocate, so
    # the memory this process's XLA client took at startup does not matter.
    child = run_cmdbuf_off_child(cfg, child_argv(args), deadline) if cfg.cmdbuf_off_child else None
    meta = collect_meta(cfg)
    log(f"[bench] device {meta.get('device')}; {meta.get('nvidia_smi')}")
    paths = Paths(cfg)
    overhead = run_overhead(cfg, paths, PARENT_SCENARIOS, (False, True), deadline)
    if child is not None:
        merge_child(overhead, child)
        if "error" in child:
            meta["cmdbuf_off_child_error"] = child["error"]
    bandwidth = run_bandwidth(cfg, paths, deadline) if cfg.bandwidth else {"error": "not run (--no-bandwidth)"}
    meta["kernels_source"] = paths.kernels_source
    meta["wall_s"] = round(time.monotonic() - t_start, 1)

    data = {"meta": meta, "overhead": overhead, "bandwidth": bandwidth}
    print(format_report(data, cfg))
    if args.out:
        write_json(args.out, data)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception:  # noqa: BLE001 - last resort: say what broke
        traceback.print_exc()
        sys.exit(1)
