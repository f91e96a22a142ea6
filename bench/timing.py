"""Timing helpers shared by the benchmarks: device time of JAX calls from a
profiler trace of a chain of calls in one ``jit``, wall time from the
difference of two chain lengths, CUDA-event device time of torch calls, and
per-kernel device-time tables (JAX profiler, ``torch.profiler``), as
``bench.timing``."""

from __future__ import annotations

import time


def split_arrays(args):
    """The corpus' ``split_arrays`` (tests/external/corpus)."""
    from bench.harness import use_corpus
    use_corpus()
    from corpus import split_arrays as split
    return split(args)


def jax_chain(call, args, k: int):
    """A jitted function running `call` k times in sequence on `args`. An
    input aliased to an output (``input_output_aliases``) takes the previous
    call's output, as in a real program, so XLA updates it in place instead
    of copying the original each time."""
    import jax
    from jax import lax

    arrays, rebuild = split_arrays(args)
    positions = [i for i, a in enumerate(args) if hasattr(a, "shape")]
    feed = [(positions.index(i), o) for i, o in getattr(call, "aliases", ())
            if isinstance(i, int) and isinstance(o, int) and i in positions]

    def run(*arrays):
        # Every call's outputs are results of the program (XLA drops an
        # optimization barrier's unused operands, so a barrier alone would
        # not keep earlier calls alive); the barrier orders each call after
        # the previous one and gives it fresh operands (no CSE).
        # An output fed forward into an aliased input is not kept: the
        # next call updates it in place, as a real program does (a kept
        # one would make XLA copy it first).
        arrays, out, results = list(arrays), None, []
        fed = {o for _, o in feed}
        for _ in range(k):
            if out is not None:
                outs = out if isinstance(out, (tuple, list)) else (out,)
                for a, o in feed:
                    arrays[a] = outs[o]
                kept = [x for j, x in enumerate(outs) if j not in fed]
                arrays, kept = lax.optimization_barrier((arrays, kept))
                results.append(kept)
            out = call(*rebuild(arrays))
        return results + [out]

    f = jax.jit(run)

    def runner():
        return jax.block_until_ready(f(*arrays))
    runner.jitted, runner.arrays = f, arrays  # to lower it (bench/external/jax_profile)
    return runner


def jax_wall_us(call, args, k1: int, k2: int) -> float:
    """Wall time per call from the difference of a k2- and a k1-call chain
    (JAX's dispatch cancels out): device time when the GPU is the
    bottleneck, host time when it is not."""
    short, long = jax_chain(call, args, k1), jax_chain(call, args, k2)
    short(), long()  # compile
    return chain_wall_us(short, long, k1, k2)


def chain_wall_us(short, long, k1: int, k2: int) -> float:
    """``jax_wall_us`` of two compiled ``jax_chain`` runners of k1 and k2
    calls (time them again without compiling)."""
    t0 = time.perf_counter(); short(); t1 = time.perf_counter()
    long(); t2 = time.perf_counter()
    return ((t2 - t1) - (t1 - t0)) / (k2 - k1) * 1e6


# Trace lines that repeat the kernels' events under other names.
_DERIVED_LINES = ("XLA Modules", "XLA Ops", "Launch Stats", "Steps",
                  "TensorFlow Name Scope", "Source code", "Framework Name Scope")


def jax_trace_events(call, args, k: int, runs: int = 1) -> list[list[tuple[str, float, float]]]:
    """For each of ``runs`` traced runs of a k-call chain (``jax_chain``,
    compiled and run once before): (name, start_us, end_us) of every GPU
    event (kernels, copies, memsets) in its JAX profiler trace, in time
    order. An event that several trace lines repeat is listed once."""
    run = jax_chain(call, args, k)
    run()
    return [trace_gpu_events(run) for _ in range(runs)]


def trace_gpu_events(run) -> list[tuple[str, float, float]]:
    """(name, start_us, end_us) of every GPU event (kernels, copies,
    memsets) of one call of ``run`` (which blocks until its work is done),
    read from a JAX profiler trace with ``jax.profiler.ProfileData``, in
    time order; an event that several trace lines repeat is listed once."""
    return trace_events(run)[0]


def trace_events(run) -> tuple[list, list]:
    """(GPU events as ``trace_gpu_events`` lists them, host events as
    (line name, event name, start_us, end_us)) of one call of ``run``."""
    import glob
    import shutil
    import tempfile

    import jax
    from jax.profiler import ProfileData

    folder = tempfile.mkdtemp(prefix="cutecall_trace_")
    try:
        jax.profiler.start_trace(folder)
        try:
            run()
        finally:
            jax.profiler.stop_trace()
        (path,) = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
        events: dict[tuple[int, int], str] = {}
        host = []
        for plane in ProfileData.from_file(path).planes:
            if not plane.name.startswith("/device:GPU"):
                host += [(ln.name, e.name, e.start_ns / 1e3, e.end_ns / 1e3)
                         for ln in plane.lines for e in ln.events]
                continue
            lines = [ln for ln in plane.lines if ln.name.startswith("Stream")] \
                or [ln for ln in plane.lines if ln.name not in _DERIVED_LINES]
            for line in lines:
                for e in line.events:
                    events.setdefault((e.start_ns, e.end_ns), e.name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    gpu = sorted(((name, s / 1e3, e / 1e3) for (s, e), name in events.items()),
                 key=lambda x: x[1])
    return gpu, host


def _is_copy(name: str) -> bool:
    return name.lower().startswith(("memcpy", "memset"))


def _span_busy(events, k: int) -> tuple[float, float]:
    kernels = [(s, e) for name, s, e in events if not _is_copy(name)]
    if not kernels:
        raise RuntimeError("the profiler trace holds no GPU kernel")
    span = max(e for _, e in kernels) - min(s for s, _ in kernels)
    return span / k, sum(e - s for s, e in kernels) / k


def jax_trace_us(call, args, k: int) -> tuple[float, float]:
    """(span, busy) µs per call of a k-call chain, read from a JAX profiler
    trace of one run: span is the first GPU kernel's start to the last's
    end, divided by k (like CUDA events around k launches); busy is the
    kernels' summed durations divided by k (no gaps). Copies and memsets
    are left out."""
    return _span_busy(jax_trace_events(call, args, k)[0], k)


def jax_trace_best_us(call, args, k: int, trials: int) -> tuple[float, float]:
    """``jax_trace_us`` of the best of ``trials`` traced runs (least span),
    the chain compiled once."""
    return min(_span_busy(ev, k) for ev in jax_trace_events(call, args, k, trials))


def kernel_table(events, k: int) -> dict:
    """Per-kernel device time of a k-call trace: ``{"kernels": [{"name",
    "launches", "us"}...] (µs and launches per call, in order of first
    launch), "span_us", "busy_us"}``; copies and memsets are listed (they
    are part of a program) but left out of span and busy, as in
    ``jax_trace_us``. ``events``: (name, start_us, end_us), in time order."""
    table: dict[str, list] = {}
    for name, s, e in events:
        row = table.setdefault(name, [0, 0])
        row[0] += 1
        row[1] += e - s
    span, busy = _span_busy(events, k)
    return {"kernels": [{"name": n, "launches": c / k, "us": t / k} for n, (c, t) in table.items()],
            "span_us": span, "busy_us": busy}


def jax_kernel_table(call, args, k: int) -> dict:
    """``kernel_table`` of a JAX profiler trace of a k-call chain."""
    return kernel_table(jax_trace_events(call, args, k)[0], k)


def torch_kernel_table(fn, k: int) -> dict:
    """``kernel_table`` of ``torch.profiler``'s CUDA events over k calls of
    ``fn`` (called once before, untraced)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(k):
            fn()
        torch.cuda.synchronize()
    ev = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
          if e.device_type == torch.autograd.DeviceType.CUDA]
    return kernel_table(sorted(ev, key=lambda x: x[1]), k)


def torch_device_us(fn, n: int) -> float:
    import torch
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / n


def torch_host_us(fn, n: int) -> float:
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / n
