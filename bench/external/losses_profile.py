"""Where a path's time goes, for the part ``losses`` (bench/external/losses.py):
GPU events of a JAX chain or of torch launches with each kernel's launch
configuration, the JAX chain's optimized HLO, and a feeding chain.

* ``jax_profile(run, k)``: one traced run of a ``bench.timing.jax_chain``
  runner -> span and busy µs per call, every GPU event per call (kernels,
  copies, memsets: an XLA copy around a custom call shows here), and the
  first event's profiler stats per kernel name (grid, block, registers,
  shared memory as CUPTI reports them); the trace itself is kept when
  ``keep`` names a folder.
* ``torch_profile(fn, k)``: the same for k back-to-back calls of a torch
  path, from a JAX profiler trace too (CUPTI sees every kernel of the
  process; one profiler, not two CUPTI sessions), else ``torch.profiler``.
* ``feed_chain(call, args, k, feed)``: k calls in one jit where output
  ``o`` of each call is input ``i`` of the next (``feed = [(i, o)]``),
  nothing else kept: each output dies at the next call, so XLA reuses two
  buffers as a program's layers do, where ``jax_chain`` keeps all k alive
  (k fresh buffers: a small kernel's outputs leave L2).
* ``hlo_text(runner)``: the chain as XLA compiled it (``as_text()`` of the
  compiled executable): copies, transposes and layouts around each
  ``custom-call``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile

from bench.timing import _DERIVED_LINES, _is_copy, split_arrays

# Profiler stats worth keeping per kernel (the rest repeat names and ids).
_STATS = ("kernel_details", "grid", "block", "registers", "regs", "shared",
          "occupancy", "theoretical_occupancy_pct", "memcpy_details")


def _summary(events, k: int) -> dict:
    """Span, busy and a per-name table of (name, start, end) events of k
    calls, copies listed but left out of span and busy."""
    kernels = [(s, e) for name, s, e, _ in events if not _is_copy(name)]
    if not kernels:
        raise RuntimeError("the profile holds no GPU kernel")
    span = (max(e for _, e in kernels) - min(s for s, _ in kernels)) / k
    busy = sum(e - s for s, e in kernels) / k
    table: dict[str, dict] = {}
    for name, s, e, stats in events:
        row = table.setdefault(name, {"name": name, "launches": 0, "us": 0.0,
                                      "config": stats})
        row["launches"] += 1
        row["us"] += e - s
    for row in table.values():
        row["launches"] /= k
        row["us"] /= k
    return {"span_us": span, "busy_us": busy, "events": list(table.values())}


def _gpu_events(run, keep: str | None) -> list:
    """(name, start_us, end_us, stats) of every GPU event of one call of
    `run`, from a JAX profiler trace (CUPTI records every kernel of the
    process, torch's launches too), in time order; the trace is copied to
    `keep` when given."""
    import jax
    from jax.profiler import ProfileData

    folder = tempfile.mkdtemp(prefix="cutecall_losses_")
    try:
        jax.profiler.start_trace(folder)
        try:
            run()
        finally:
            jax.profiler.stop_trace()
        (path,) = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
        seen: dict[tuple, tuple] = {}
        for plane in ProfileData.from_file(path).planes:
            if not plane.name.startswith("/device:GPU"):
                continue
            lines = [ln for ln in plane.lines if ln.name.startswith("Stream")] \
                or [ln for ln in plane.lines if ln.name not in _DERIVED_LINES]
            for line in lines:
                for e in line.events:
                    if (e.start_ns, e.end_ns) in seen:
                        continue
                    stats = {str(n): str(v) for n, v in e.stats
                             if any(s in str(n) for s in _STATS)}
                    seen[(e.start_ns, e.end_ns)] = (e.name, e.start_ns / 1e3,
                                                    e.end_ns / 1e3, stats)
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(path, os.path.join(keep, "trace.xplane.pb"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return sorted(seen.values(), key=lambda x: x[1])


def jax_profile(run, k: int, keep: str | None = None) -> dict:
    """Profile one call of `run` (a compiled ``jax_chain`` runner of k
    calls): ``_summary`` of its GPU events with their stats."""
    return _summary(_gpu_events(run, keep), k)


def torch_profile(fn, k: int, keep: str | None = None) -> dict:
    """Profile k back-to-back calls of `fn` (called once before, untraced):
    ``_summary`` of their GPU events, from a JAX profiler trace (one
    profiler in the process: torch.profiler's CUPTI session and JAX's are
    not mixed); ``torch.profiler`` where that trace holds no kernel."""
    import torch

    def run():
        for _ in range(k):
            fn()
        torch.cuda.synchronize()
    fn()
    torch.cuda.synchronize()
    events = _gpu_events(run, keep)
    if any(not _is_copy(name) for name, *_ in events):
        return _summary(events, k)
    return _torch_profiler(fn, k, keep)


def _torch_profiler(fn, k: int, keep: str | None) -> dict:
    """``torch_profile`` by ``torch.profiler``'s Chrome trace (grid, block
    and registers per kernel)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(k):
            fn()
        torch.cuda.synchronize()
    folder = tempfile.mkdtemp(prefix="cutecall_losses_")
    try:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(path, os.path.join(keep, "trace.json"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    events = []
    for e in trace.get("traceEvents", []):
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        args = e.get("args", {})
        config = {key: args[key] for key in ("grid", "block", "registers per thread",
                                             "shared memory", "est. achieved occupancy %")
                  if key in args}
        name = e["name"] if e["cat"] == "kernel" else f"Memcpy {e['name']}"
        events.append((name, float(e["ts"]), float(e["ts"]) + float(e["dur"]), config))
    return _summary(sorted(events, key=lambda x: x[1]), k)


def feed_chain(call, args, k: int, feed: list[tuple[int, int]]):
    """A runner of k calls of `call` in one jit, output ``o`` of each call
    feeding array argument ``i`` of the next for each ``(i, o)`` in
    `feed`; only the last call's outputs are results."""
    import jax

    arrays, rebuild = split_arrays(args)

    def run(*arrays):
        arrays, out = list(arrays), None
        for _ in range(k):
            if out is not None:
                outs = out if isinstance(out, (tuple, list)) else (out,)
                for i, o in feed:
                    arrays[i] = outs[o]
            out = call(*rebuild(arrays))
        return out

    f = jax.jit(run)

    def runner():
        return jax.block_until_ready(f(*arrays))
    runner.jitted, runner.arrays = f, arrays
    return runner


def feedable(jargs, outputs) -> list[tuple[int, int]]:
    """The (array argument, output) pairs of equal shape and dtype, each
    argument and output used once, in order: what ``feed_chain`` feeds."""
    arrays, _ = split_arrays(jargs)
    outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    pairs, used = [], set()
    for o, y in enumerate(outs):
        for i, x in enumerate(arrays):
            if i not in used and getattr(y, "shape", None) == x.shape and y.dtype == x.dtype:
                pairs.append((i, o))
                used.add(i)
                break
    return pairs


def hlo_text(runner) -> str:
    """The optimized HLO of a chain runner's jitted function."""
    return runner.jitted.lower(*runner.arrays).compile().as_text()
