#!/usr/bin/env python3
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
cutecall (``cutecall.examples.kernels.copy``), cutlass.jax (same launcher) and
XLA's own elementwise kernel (``x + s`` with ``s`` a runtime f32 zero, which XLA
cannot fold away), each jitted and dispatched back to back; GB/s counts bytes
read + written (2 x size) per call, median over ``--bw-trials`` trials. Each
path's output is checked against its input once.

A path that fails (import, build, compile, run) is recorded with its error
string and the run goes on. The whole run aims to finish in ``--budget-s``
seconds; measurements (and trials) that would start after that are skipped
and say so.

Usage (GPU machine, after tools/gpu/setup.sh and ``. /tmp/site/env.sh``):

    python3 bench/overhead/run.py --out $OUT/overhead.json

Without a GPU: ``--dry-run`` prints the tables from synthetic numbers;
``--lower-only`` builds every path (DSL compiles included; set
``CUTE_DSL_ARCH=sm_90a``) and lowers each scenario for CUDA, listing the
custom calls; ``--allow-cpu`` runs everything on the CPU backend (every GPU
path then records its error), which exercises the error handling.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
HANDLER_SOURCE = Path(__file__).resolve().parent / "handwritten_ffi.cu"
BUILD_HANDLER = Path(__file__).resolve().parent / "build_handler.sh"
DEFAULT_HANDLER_SO = "/tmp/cutecall_bench/libhandwritten_ffi.so"
CMDBUF_OFF_FLAG = "--xla_gpu_enable_command_buffer="
CMDBUF_OFF = "_cmdbuf_off"
CHILD_MARKER = "@@CUTECALL_BENCH_CHILD_JSON@@"
SKIPPED = "skipped: time budget spent"

PATHS = ("cutecall", "handwritten", "handwritten_ex", "cutlass_jax", "tvm_ffi")
GRAPH_ONLY_PATHS = ("handwritten_ex",)
PATH_LABELS = {
    "cutecall": "cutecall",
    "handwritten": "hand-written FFI",
    "handwritten_ex": "hand-written FFI (DSL-style launch)",
    "cutlass_jax": "cutlass.jax",
    "tvm_ffi": "TVM-FFI (jax_tvm_ffi)",
    "xla": "XLA (x + s)",
}
SCENARIOS = ("unrolled", "unrolled_donate", "unrolled_cmdbuf_off", "fori", "fori_cmdbuf_off", "eager")
PARENT_SCENARIOS = ("eager", "unrolled", "unrolled_donate", "fori")
CHILD_SCENARIOS = ("unrolled", "fori")
BLOCK_TRIALS = 7  # --trials default with --no-interleave


# --------------------------------------------------------------------------
# configuration and records
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Config:
    n: int = 1024
    unroll: int = 200
    fori: int = 1000
    trials: int = 15
    warmup: int = 3
    trial_ms: float = 40.0
    max_reps: int = 20000
    bw_gib: float = 1.0
    bw_trials: int = 10
    bw_reps: int = 8
    budget_s: float = 225.0
    child_timeout_s: float = 100.0
    paths: tuple[str, ...] = PATHS
    handler_so: str = DEFAULT_HANDLER_SO
    bandwidth: bool = True
    cmdbuf_off_child: bool = True
    interleave: bool = True


@dataclasses.dataclass
class Measurement:
    """One (target, scenario) cell, microseconds per call. ``us_per_call``
    (the median trial) is None when it failed."""

    us_per_call: float | None = None
    min_us_per_call: float | None = None
    dispatch_us: float | None = None
    trials_us: list[float] = dataclasses.field(default_factory=list)
    dispatch_trials_us: list[float] = dataclasses.field(default_factory=list)
    reps: int = 0
    calls_per_invocation: int = 0
    compile_s: float | None = None
    executes_per_invocation: float | None = None
    call_stats_delta: dict[str, float] | None = None
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> "Measurement":
        return cls(error=error)

    @classmethod
    def from_trials(cls, trials_us: list[float], dispatch_trials_us: list[float],
                    **fields: Any) -> "Measurement":
        return cls(
            us_per_call=round(statistics.median(trials_us), 4),
            min_us_per_call=round(min(trials_us), 4),
            dispatch_us=round(statistics.median(dispatch_trials_us), 4),
            trials_us=[round(t, 4) for t in trials_us],
            dispatch_trials_us=[round(t, 4) for t in dispatch_trials_us],
            **fields,
        )


@dataclasses.dataclass
class Target:
    """A path in one CUDA-graph mode: ``build()`` returns ``call(x) -> y``."""

    key: str
    path: str
    graph: bool
    build: Callable[[], Callable[[Any], Any]]


class Deadline:
    """The run's time budget."""

    def __init__(self, seconds: float):
        self.t_end = time.monotonic() + seconds

    def left(self) -> float:
        return self.t_end - time.monotonic()

    def expired(self) -> bool:
        return self.left() <= 0


def short_error(exc: BaseException, limit: int = 600) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------


def _block(y: Any) -> None:
    import jax

    jax.block_until_ready(y)


def pick_reps(one_s: float, cfg: Config, cap: int | None = None) -> int:
    target = cfg.trial_ms / 1e3
    reps = int(target / max(one_s, 1e-7))
    return max(1, min(reps, cap or cfg.max_reps))


class Runner:
    """One cell made ready to time: the constructor compiles, warms up and
    calibrates ``fn``; each ``trial()`` times ``reps`` invocations.

    ``feedback``: each invocation's output is the next one's input (for a
    jit that donates its argument). ``stats``: a counter snapshot function
    (``cutecall._core.call_stats``), read around every trial."""

    def __init__(self, fn: Callable[[Any], Any], x: Any, calls: int, cfg: Config, *,
                 feedback: bool = False, reps: int | None = None,
                 stats: Callable[[], dict[str, Any]] | None = None):
        self.fn, self.x, self.calls, self.feedback, self.stats = fn, x, calls, feedback, stats
        self.total_us: list[float] = []
        self.dispatch_us: list[float] = []
        self.stats_delta: dict[str, float] = {}
        self.error: str | None = None
        self.compile_s = self._invoke(1)[0]
        for _ in range(cfg.warmup):
            self._invoke(1)
        self.reps = reps or pick_reps(self._invoke(1)[0], cfg)

    def _invoke(self, reps: int) -> tuple[float, float]:
        """Seconds (total, dispatch) for ``reps`` back-to-back invocations:
        dispatch ends when the loop returns, total after the final block."""
        fn, x, feedback = self.fn, self.x, self.feedback
        t0 = time.perf_counter()
        y = x
        for _ in range(reps):
            y = fn(x)
            if feedback:
                x = y
        t1 = time.perf_counter()
        _block(y)
        t2 = time.perf_counter()
        self.x = x
        return t2 - t0, t1 - t0

    def trial(self) -> None:
        before = self.stats() if self.stats else None
        total, dispatch = self._invoke(self.reps)
        if before is not None:
            for name, value in self.stats().items():
                if isinstance(value, (int, float)) and isinstance(before.get(name), (int, float)):
                    self.stats_delta[name] = self.stats_delta.get(name, 0) + value - before[name]
        scale = 1e6 / (self.reps * self.calls)
        self.total_us.append(total * scale)
        self.dispatch_us.append(dispatch * scale)

    def result(self) -> Measurement:
        if self.error is not None:
            return Measurement.failed(self.error)
        if not self.total_us:
            return Measurement.failed(SKIPPED)
        executes = self.stats_delta.get("executes")
        if executes is not None:
            executes = round(executes / (self.reps * len(self.total_us)), 3)
        return Measurement.from_trials(
            self.total_us, self.dispatch_us, reps=self.reps, calls_per_invocation=self.calls,
            compile_s=round(self.compile_s, 3), executes_per_invocation=executes,
            call_stats_delta=self.stats_delta or None)


def run_trials(runners: list[Runner], trials: int, deadline: Deadline) -> None:
    """``trials`` rounds of one trial per runner, round t starting at runner
    t % n; a runner that fails keeps its error and leaves the rotation."""
    n = len(runners)
    for t in range(trials):
        if deadline.expired():
            log(f"[bench] time budget spent after {t} of {trials} trials")
            return
        for i in range(n):
            runner = runners[(t + i) % n]
            if runner.error is None:
                try:
                    runner.trial()
                except Exception as exc:  # noqa: BLE001 - a failing path must not stop the run
                    runner.error = short_error(exc)


def measure(fn: Callable[[Any], Any], x: Any, calls: int, cfg: Config,
            *, trials: int, reps: int | None = None) -> Measurement:
    """Compile, warm up, calibrate, then time ``trials`` trials of ``reps``."""
    runner = Runner(fn, x, calls, cfg, reps=reps)
    for _ in range(trials):
        runner.trial()
    return runner.result()


# --------------------------------------------------------------------------
# scenarios
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Scenario:
    """``build(call, cfg) -> (jitted fn, calls per invocation)``. ``feedback``:
    the fn donates its argument, so each output is fed back as the next input.
    ``graph_only``: run for graph-capable targets only."""

    build: Callable[[Callable, Config], tuple[Callable, int]]
    feedback: bool = False
    graph_only: bool = False


def _chain(call: Callable, cfg: Config) -> Callable:
    def chain(x):
        for _ in range(cfg.unroll):
            x = call(x)
        return x

    return chain


def scenario_unrolled(call: Callable, cfg: Config) -> tuple[Callable, int]:
    import jax

    return jax.jit(_chain(call, cfg)), cfg.unroll


def scenario_unrolled_donate(call: Callable, cfg: Config) -> tuple[Callable, int]:
    import jax

    return jax.jit(_chain(call, cfg), donate_argnums=0), cfg.unroll


def scenario_fori(call: Callable, cfg: Config) -> tuple[Callable, int]:
    import jax
    from jax import lax

    def loop(x):
        return lax.fori_loop(0, cfg.fori, lambda i, y: call(y), x)

    return jax.jit(loop), cfg.fori


def scenario_eager(call: Callable, cfg: Config) -> tuple[Callable, int]:
    import jax

    return jax.jit(lambda x: call(x)), 1


SCENARIO_SPECS = {
    "unrolled": Scenario(scenario_unrolled),
    "unrolled_donate": Scenario(scenario_unrolled_donate, feedback=True, graph_only=True),
    "fori": Scenario(scenario_fori),
    "eager": Scenario(scenario_eager),
}


def has_column(column: str, graph: bool) -> bool:
    """Whether a graph-capable (or no-graph) target gets this result column."""
    return graph or not (column.endswith(CMDBUF_OFF) or SCENARIO_SPECS[column].graph_only)


def prepare(name: str, call: Callable, x: Any, cfg: Config,
            stats: Callable[[], dict[str, Any]] | None) -> Runner:
    spec = SCENARIO_SPECS[name]
    fn, calls = spec.build(call, cfg)
    if spec.feedback:
        x = input_array(cfg.n)  # donated: this cell's own buffer
    return Runner(fn, x, calls, cfg, feedback=spec.feedback, stats=stats)


# --------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------


class Paths:
    """Builds the call for each path, lazily, caching shared state."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self._kernels = None
        self.kernels_source: str | None = None
        self._handler_lib = None
        self._tvm_fn = None
        self._registered: set[str] = set()
        self._keepalive: list[Any] = []

    # -- shared pieces --------------------------------------------------
    def kernels(self):
        """``cutecall.examples.kernels``; if cutecall itself does not import,
        the same file loaded standalone (the launchers only need the DSL)."""
        if self._kernels is not None:
            return self._kernels
        try:
            self._kernels = importlib.import_module("cutecall.examples.kernels")
            self.kernels_source = "cutecall.examples.kernels"
        except Exception as exc:  # noqa: BLE001
            path = REPO / "python" / "cutecall" / "examples" / "kernels.py"
            log(f"[bench] cutecall.examples.kernels did not import ({short_error(exc, 200)}); "
                f"loading {path} standalone")
            spec = importlib.util.spec_from_file_location("_cutecall_bench_kernels", path)
            if spec is None or spec.loader is None:
                raise
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
            self._kernels = mod
            self.kernels_source = str(path)
        return self._kernels

    def sds(self, n: int | None = None):
        import jax
        import jax.numpy as jnp

        return jax.ShapeDtypeStruct((n or self.cfg.n,), jnp.float32)

    # -- (a) cutecall -----------------------------------------------------
    def cutecall(self, graph: bool, launcher: str = "empty_launcher", n: int | None = None):
        import cutecall

        fn = getattr(self.kernels(), launcher)
        return cutecall.cutlass_call(fn, output_shape_dtype=self.sds(n), allow_cuda_graph=graph)

    # -- (b) hand-written XLA FFI handlers --------------------------------
    def handler_lib(self):
        """The built handwritten_ffi.cu, (re)built first if it is missing or
        older than its source."""
        if self._handler_lib is None:
            import ctypes

            so = Path(self.cfg.handler_so)
            if not so.is_file() or so.stat().st_mtime < HANDLER_SOURCE.stat().st_mtime:
                log(f"[bench] {so} missing or older than {HANDLER_SOURCE.name}; "
                    f"building it with {BUILD_HANDLER}")
                subprocess.run(["bash", str(BUILD_HANDLER), str(so)], check=True,
                               env={"PYTHON": sys.executable, **os.environ},
                               stdout=sys.stderr, stderr=sys.stderr)
            self._handler_lib = ctypes.cdll.LoadLibrary(str(so))
        return self._handler_lib

    def _handler_call(self, symbol: str):
        import jax

        name = f"cutecall_bench.{symbol}"
        if name not in self._registered:
            capsule = jax.ffi.pycapsule(getattr(self.handler_lib(), symbol))
            jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
            self._registered.add(name)
        sds = self.sds()
        return lambda x: jax.ffi.ffi_call(name, sds)(x)

    def handwritten(self, graph: bool):
        return self._handler_call("HandwrittenEmpty" if graph else "HandwrittenEmptyNoGraph")

    def handwritten_ex(self, graph: bool):
        """Graph-capable only (``GRAPH_ONLY_PATHS``): ``graph`` is always True."""
        return self._handler_call("HandwrittenEmptyEx")

    # -- (c) cutlass.jax ----------------------------------------------------
    def cutlass_jax(self, graph: bool, launcher: str = "empty_launcher", n: int | None = None):
        import cutlass.jax as cjax

        fn = getattr(self.kernels(), launcher)
        return cjax.cutlass_call(fn, output_shape_dtype=self.sds(n), allow_cuda_graph=graph)

    # -- (d) TVM-FFI + jax_tvm_ffi ---------------------------------------
    def tvm_function(self):
        """``empty_launcher`` compiled with ``--enable-tvm-ffi``; the stream
        argument becomes the TVM-FFI environment stream, which jax_tvm_ffi
        sets to XLA's stream around each call, so the function takes
        ``(x, out)``."""
        if self._tvm_fn is None:
            import tvm_ffi  # noqa: F401 - the DSL needs it for --enable-tvm-ffi
            import cutlass
            import cutlass.cute as cute
            from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

            x = make_fake_compact_tensor(cutlass.Float32, (self.cfg.n,))
            y = make_fake_compact_tensor(cutlass.Float32, (self.cfg.n,))
            stream = make_fake_stream(use_tvm_ffi_env_stream=True)
            compiled = cute.compile(self.kernels().empty_launcher, stream, x, y,
                                    options="--enable-tvm-ffi")
            self._keepalive.append(compiled)  # owns the JIT-ed code
            fn = compiled
            if hasattr(compiled, "__tvm_ffi_object__"):
                fn = compiled.__tvm_ffi_object__()  # the positional tvm_ffi.Function
            if fn is None:
                raise RuntimeError("cute.compile(--enable-tvm-ffi) produced no tvm_ffi.Function")
            self._tvm_fn = fn
        return self._tvm_fn

    def tvm_ffi(self, graph: bool):
        import jax
        import jax_tvm_ffi

        name = f"cutecall_bench.tvm_ffi_{'graph' if graph else 'nograph'}"
        if name not in self._registered:
            jax_tvm_ffi.register_ffi_target(name, self.tvm_function(), ["args", "rets"],
                                            platform="gpu", allow_cuda_graph=graph)
            self._registered.add(name)
        sds = self.sds()
        return lambda x: jax.ffi.ffi_call(name, sds)(x)

    # -- targets ------------------------------------------------------------
    def targets(self, graph_modes: tuple[bool, ...] = (False, True)) -> list[Target]:
        """No-graph target first: it runs the kernel once outside any stream
        capture, so lazy module loading never happens inside a capture.
        Graph-only paths have no no-graph target."""
        out = []
        for path in self.cfg.paths:
            builder = getattr(self, path)
            for graph in graph_modes:
                if graph or path not in GRAPH_ONLY_PATHS:
                    key = path if graph else f"{path}_nograph"
                    out.append(Target(key, path, graph, lambda b=builder, g=graph: b(g)))
        return out


# --------------------------------------------------------------------------
# suites
# --------------------------------------------------------------------------


def input_array(n: int):
    import jax.numpy as jnp

    return jnp.arange(n, dtype=jnp.float32)


def cutecall_call_stats() -> Callable[[], dict[str, Any]] | None:
    """``cutecall._core.call_stats`` where this build of cutecall has it."""
    try:
        core = importlib.import_module("cutecall._core")
    except Exception:  # noqa: BLE001 - no cutecall, no counter
        return None
    return core.call_stats if hasattr(core, "call_stats") else None


def _record(row: dict[str, Any], key: str, column: str, m: Measurement) -> None:
    row[column] = dataclasses.asdict(m)
    if m.us_per_call is None:
        shown = m.error
    else:
        shown = (f"{m.us_per_call:.3f} us/call [min {m.min_us_per_call:.3f}], "
                 f"dispatch {m.dispatch_us:.3f}")
        if m.executes_per_invocation is not None:
            shown += f", executes {m.executes_per_invocation:g}/{m.calls_per_invocation}"
    log(f"[bench] {key:22s} {column:22s} {shown}")


def run_overhead(cfg: Config, paths: Paths, scenarios: tuple[str, ...],
                 graph_modes: tuple[bool, ...], deadline: Deadline,
                 suffix: str = "") -> dict[str, dict[str, Any]]:
    """``{target: {"path", "graph", scenario+suffix: Measurement-dict}}``.

    Every target is built first. Interleaved (``cfg.interleave``): per
    scenario, all its targets are prepared, then their trials rotate (see
    ``run_trials``). Otherwise each cell is prepared and timed on its own,
    target after target."""
    x = input_array(cfg.n)
    stats = cutecall_call_stats()
    results: dict[str, dict[str, Any]] = {}
    built: dict[str, tuple[Target, Callable]] = {}
    for target in paths.targets(graph_modes):
        row = results[target.key] = {"path": target.path, "graph": target.graph}
        error = SKIPPED if deadline.expired() else None
        if error is None:
            t0 = time.perf_counter()
            try:
                built[target.key] = (target, target.build())
                row["build_s" + suffix] = round(time.perf_counter() - t0, 3)
            except Exception as exc:  # noqa: BLE001
                error = "build: " + short_error(exc)
                log(f"[bench] {target.key}: {error}")
        if error is not None:
            for s in scenarios:
                if has_column(s, target.graph):
                    row[s + suffix] = dataclasses.asdict(Measurement.failed(error))

    cells = [(key, s) for key, (target, _) in built.items() for s in scenarios
             if has_column(s, target.graph)]
    if cfg.interleave:
        groups = [[c for c in cells if c[1] == s] for s in scenarios]
    else:
        groups = [[c] for c in cells]
    for group in groups:
        runners: dict[tuple[str, str], Runner] = {}
        for key, s in group:
            target, call = built[key]
            if deadline.expired():
                _record(results[key], key, s + suffix, Measurement.failed(SKIPPED))
                continue
            try:
                runners[key, s] = prepare(s, call, x, cfg,
                                          stats if target.path == "cutecall" else None)
            except Exception as exc:  # noqa: BLE001 - a failing path must not stop the run
                _record(results[key], key, s + suffix, Measurement.failed(short_error(exc)))
        run_trials(list(runners.values()), cfg.trials, deadline)
        for (key, s), runner in runners.items():
            _record(results[key], key, s + suffix, runner.result())
    return results


def lower_only(cfg: Config, paths: Paths) -> dict[str, Any]:
    """No GPU needed: lower every (target, scenario) for CUDA and report the
    custom-call targets in the StableHLO. Checks that each path builds and
    that the chains lower as intended (the donated chain: input aliased to
    the output)."""
    import re

    import jax
    import jax.numpy as jnp

    x = jax.ShapeDtypeStruct((cfg.n,), jnp.float32)
    out: dict[str, Any] = {}
    for target in paths.targets():
        row: dict[str, Any] = {"path": target.path, "graph": target.graph}
        out[target.key] = row
        try:
            call = target.build()
        except Exception as exc:  # noqa: BLE001
            row["error"] = "build: " + short_error(exc)
            continue
        for name, spec in SCENARIO_SPECS.items():
            if not has_column(name, target.graph):
                continue
            try:
                fn, _ = spec.build(call, cfg)
                text = fn.trace(x).lower(lowering_platforms=("cuda",)).as_text()
                names = re.findall(r"custom_call @([\w.]+)\(", text)
                names += re.findall(r'call_target_name = "([^"]+)"', text)
                row[name] = {"custom_calls": len(names), "targets": sorted(set(names)),
                             "func_calls": len(re.findall(r"\bcall @", text))}
                if spec.feedback:
                    row[name]["input_aliased"] = "tf.aliasing_output" in text
            except Exception as exc:  # noqa: BLE001
                row[name] = {"error": short_error(exc)}
    return out


def format_lowering_table(low: dict[str, Any]) -> str:
    lines = ["Lowered for CUDA (no GPU used): custom-call targets per target and scenario"]
    for key, row in low.items():
        if "error" in row:
            lines.append(f"  {key:22s} ERROR {row['error']}")
            continue
        for name in SCENARIO_SPECS:
            r = row.get(name)
            if r is None:
                continue
            if "error" in r:
                lines.append(f"  {key:22s} {name:15s} ERROR {r['error']}")
                continue
            line = (f"  {key:22s} {name:15s} {r['custom_calls']} custom_call op(s), "
                    f"{r['func_calls']} func call(s): {', '.join(r['targets'])}")
            if "input_aliased" in r:
                line += "; input aliased to output" if r["input_aliased"] else "; input NOT aliased"
            lines.append(line)
    return "\n".join(lines)


def run_cmdbuf_off_child(cfg: Config, argv_base: list[str], deadline: Deadline) -> dict[str, Any]:
    """Re-run this script with command buffers off; returns its overhead dict
    or ``{"error": ...}``."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + CMDBUF_OFF_FLAG).strip()
    # Never fight the parent (or anyone) for preallocated GPU memory.
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    budget = max(10.0, min(cfg.child_timeout_s, deadline.left()))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child-cmdbuf-off",
           "--budget-s", str(budget - 5), *argv_base]
    log(f"[bench] child (command buffers off): XLA_FLAGS={env['XLA_FLAGS']!r}, timeout {budget:.0f}s")
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        sys.stderr.write(err)
        return {"error": f"child timed out after {budget:.0f}s"}
    sys.stderr.write(proc.stderr)  # its progress lines, after the fact
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_MARKER):
            return json.loads(line[len(CHILD_MARKER):])
    tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])
    return {"error": f"child exited {proc.returncode} without results: {tail}"}


def merge_child(overhead: dict[str, dict[str, Any]], child: dict[str, Any]) -> None:
    child_rows = child.get("overhead", {}) if "error" not in child else {}
    for key, row in overhead.items():
        if not row.get("graph"):
            continue
        for s in CHILD_SCENARIOS:
            name = s + CMDBUF_OFF
            if key in child_rows and name in child_rows[key]:
                row[name] = child_rows[key][name]
                if "build_s" + CMDBUF_OFF in child_rows[key]:
                    row["build_s" + CMDBUF_OFF] = child_rows[key]["build_s" + CMDBUF_OFF]
            else:
                err = child.get("error", "not measured by the child")
                row[name] = dataclasses.asdict(Measurement.failed(err))


def bandwidth_paths(paths: Paths, n: int) -> dict[str, Callable[[], Callable]]:
    def xla():
        import jax
        import jax.numpy as jnp

        add = jax.jit(lambda x, s: x + s)
        zero = jnp.zeros((), jnp.float32)
        return lambda x: add(x, zero)

    return {
        "cutecall": lambda: paths.cutecall(True, launcher="copy", n=n),
        "cutlass_jax": lambda: paths.cutlass_jax(True, launcher="copy", n=n),
        "xla": xla,
    }


def run_bandwidth(cfg: Config, paths: Paths, deadline: Deadline) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    n = int(cfg.bw_gib * (1 << 30)) // 4
    nbytes = n * 4
    out: dict[str, Any] = {"elements": n, "bytes": nbytes, "bytes_moved_per_call": 2 * nbytes}
    try:
        x = jax.block_until_ready(jnp.arange(n, dtype=jnp.float32))
    except Exception as exc:  # noqa: BLE001
        out["error"] = short_error(exc)
        return out
    for name, build in bandwidth_paths(paths, n).items():
        if name not in ("xla",) and name not in cfg.paths:
            continue
        if deadline.expired():
            out[name] = {"error": SKIPPED}
            continue
        try:
            call = build()
            fn = jax.jit(lambda v, c=call: c(v)) if name != "xla" else call
            y = jax.block_until_ready(fn(x))
            ok = bool(jnp.array_equal(y, x))
            del y
            m = measure(fn, x, 1, cfg, trials=cfg.bw_trials, reps=cfg.bw_reps)
            gbps = 2 * nbytes / (m.us_per_call * 1e-6) / 1e9
            out[name] = {"gbps": round(gbps, 1), "ms_per_call": round(m.us_per_call / 1e3, 4),
                         "output_matches_input": ok,
                         "trials_gbps": [round(2 * nbytes / (t * 1e-6) / 1e9, 1) for t in m.trials_us],
                         "reps": m.reps, "compile_s": m.compile_s}
        except Exception as exc:  # noqa: BLE001
            out[name] = {"error": short_error(exc)}
        shown = f"{out[name]['gbps']} GB/s" if "gbps" in out[name] else out[name]["error"]
        log(f"[bench] bandwidth {name:12s} {shown}")
    return out


# --------------------------------------------------------------------------
# metadata
# --------------------------------------------------------------------------


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _nvidia_smi() -> str | None:
    try:
        res = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        return res.stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def collect_meta(cfg: Config) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": sys.version.split()[0],
        "argv": sys.argv,
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "config": dataclasses.asdict(cfg),
        "nvidia_smi": _nvidia_smi(),
        "versions": {d: _dist_version(d) for d in (
            "jax", "jaxlib", "jax-cuda13-plugin", "nvidia-cutlass-dsl",
            "nvidia-cutlass-dsl-libs-cu13", "cuda-bindings", "apache-tvm-ffi",
            "jax-tvm-ffi", "cutecall")},
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


# --------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: the result column it reads, its two header lines, and
    how it shows a measurement that has a value."""

    key: str
    head: tuple[str, str]
    show: Callable[[dict[str, Any]], str]


def column_heads(cfg: Config) -> dict[str, tuple[str, str]]:
    unrolled, fori = f"jit x{cfg.unroll}", f"fori x{cfg.fori}"
    return {
        "unrolled": (unrolled, "cmdbuf on"),
        "unrolled_donate": (unrolled, "donated"),
        "unrolled_cmdbuf_off": (unrolled, "cmdbuf off"),
        "fori": (fori, "cmdbuf on"),
        "fori_cmdbuf_off": (fori, "cmdbuf off"),
        "eager": ("eager", "dispatch"),
    }


def target_label(row: dict[str, Any]) -> str:
    return PATH_LABELS.get(row["path"], row["path"]) + ("" if row["graph"] else " [no graph]")


def _cell(m: dict[str, Any] | None, show: Callable[[dict[str, Any]], str], notes: list[str]) -> str:
    if not m:
        return "-"
    if m.get("us_per_call") is not None:
        return show(m)
    err = m.get("error") or "failed"
    if err.startswith("skipped"):
        return "skip"
    if err not in notes:
        notes.append(err)
    return f"ERR{notes.index(err) + 1}"


def format_grid(title: str, rows: list[dict[str, Any]], columns: list[Column],
                footer: list[str]) -> str:
    notes: list[str] = []
    body = [[target_label(r)] + [_cell(r.get(c.key), c.show, notes) for c in columns]
            for r in rows]
    width0 = max([len("target")] + [len(b[0]) for b in body])
    widths = [max([9, *map(len, c.head)] + [len(b[i + 1]) for b in body])
              for i, c in enumerate(columns)]
    lines = [title] + [
        "  ".join([first.ljust(width0)] + [c.head[k].rjust(w) for c, w in zip(columns, widths)])
        for k, first in enumerate(("target", ""))]
    lines.append("-" * len(lines[-1]))
    lines += ["  ".join([b[0].ljust(width0)] + [v.rjust(w) for v, w in zip(b[1:], widths)])
              for b in body]
    lines += [f"  ERR{i + 1}: {e}" for i, e in enumerate(notes)]
    return "\n".join(lines + footer)


def format_overhead_table(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    columns = [Column(s, h, lambda m: f"{m['us_per_call']:.2f} [{m['min_us_per_call']:.2f}]")
               for s, h in column_heads(cfg).items()]
    order = "interleaved" if cfg.interleave else "in one block per path"
    title = (f"Launch overhead: empty kernel, f32[{cfg.n}] -> f32[{cfg.n}], microseconds per call, "
             f"median [min] of {cfg.trials} trials ({order})")
    footer = ["  [no graph] targets opt out of CUDA graphs (allow_cuda_graph=False / no "
              "kCmdBufferCompatible): under default flags they run as plain thunks;",
              "  '-' = not measured for them (no command buffer to turn off; the donated chain "
              "is for graph-capable targets). 'skip' = time budget spent."]
    return format_grid(title, list(overhead.values()), columns, footer)


def format_dispatch_table(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    heads = column_heads(cfg)
    columns = [Column(s, (heads[s][1], what), lambda m, f=field: f"{m[f]:.2f}")
               for s in ("unrolled", "unrolled_donate")
               for what, field in (("total", "us_per_call"), ("dispatch", "dispatch_us"))]
    title = (f"Host dispatch vs total, jit x{cfg.unroll}, graph-capable targets, "
             f"microseconds per call (medians)")
    footer = ["  dispatch = until the dispatch loop returned, before the final block. Close to "
              "total: the host sets the pace; well below: the GPU does."]
    return format_grid(title, [r for r in overhead.values() if r["graph"]], columns, footer)


def format_executes_table(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    rows = [r for r in overhead.values() if r["path"] == "cutecall"]
    if not any(isinstance(m, dict) and m.get("executes_per_invocation") is not None
               for r in rows for m in r.values()):
        return "Execute counter: not recorded (cutecall._core has no call_stats())."

    def show(m: dict[str, Any]) -> str:
        if m.get("executes_per_invocation") is None:
            return "-"
        return f"{m['executes_per_invocation']:g}/{m['calls_per_invocation']}"

    columns = [Column(s, h, show) for s, h in column_heads(cfg).items()]
    title = ("cutecall execute-handler runs / calls, per invocation "
             "(cutecall._core.call_stats()['executes'] over the timed trials)")
    footer = ["  with command buffers: 0 = XLA replays the recorded graph without the handler; "
              "= calls: the handler runs on every replay."]
    return format_grid(title, rows, columns, footer)


def format_summary(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    def ratio(s: str, ref: str, field: str) -> str:
        a = overhead.get("cutecall", {}).get(s) or {}
        b = overhead.get(ref, {}).get(s) or {}
        if a.get(field) is None or not b.get(field):
            return "n/a"
        return f"{a[field] / b[field]:.2f}x"

    heads = column_heads(cfg)
    refs = ("handwritten", "handwritten_ex")
    width = max(len(PATH_LABELS[r]) for r in refs)
    lines = [f"{'cutecall / hand-written (target <= 1.10x)':{width + 23}s} {'medians':>8s} {'mins':>8s}"]
    for s in ("unrolled", "unrolled_donate"):
        for ref in refs:
            lines.append(f"  {' '.join(heads[s]):18s} / {PATH_LABELS[ref]:{width}s}"
                         f" {ratio(s, ref, 'us_per_call'):>8s} {ratio(s, ref, 'min_us_per_call'):>8s}")
    return "\n".join(lines)


def format_bandwidth_table(bw: dict[str, Any], cfg: Config) -> str:
    lines = [f"Copy bandwidth: f32, {cfg.bw_gib:g} GiB in -> new {cfg.bw_gib:g} GiB out, "
             f"GB/s counting read + write (median of {cfg.bw_trials} trials)"]
    if "error" in bw:
        return "\n".join(lines + [f"  ERROR: {bw['error']}"])
    lines.append(f"{'path':24s} {'GB/s':>8s} {'ms/call':>9s}  check")
    for name in ("cutecall", "cutlass_jax", "xla"):
        r = bw.get(name)
        if r is None:
            continue
        label = PATH_LABELS.get(name, name)
        if "gbps" in r:
            check = "ok" if r.get("output_matches_input") else "MISMATCH"
            lines.append(f"{label:24s} {r['gbps']:8.1f} {r['ms_per_call']:9.3f}  {check}")
        else:
            lines.append(f"{label:24s} {'ERR':>8s} {'':9s}  {r.get('error')}")
    return "\n".join(lines)


def format_report(data: dict[str, Any], cfg: Config) -> str:
    """Every table, then the device (when measured), the summary last."""
    overhead, meta = data["overhead"], data["meta"]
    parts = [
        format_overhead_table(overhead, cfg),
        format_dispatch_table(overhead, cfg),
        format_executes_table(overhead, cfg),
        format_bandwidth_table(data["bandwidth"], cfg),
    ]
    if "device" in meta:
        parts.append(f"(device: {meta['device']}; {meta.get('nvidia_smi')}; wall {meta['wall_s']} s)")
    return "\n\n".join(parts + [format_summary(overhead, cfg)])


def synthetic_results(cfg: Config) -> dict[str, Any]:
    """Made-up numbers in the real shape, for ``--dry-run``."""
    overhead: dict[str, dict[str, Any]] = {}
    base = {"cutecall": 2.0, "handwritten": 1.8, "handwritten_ex": 1.9, "cutlass_jax": 2.6,
            "tvm_ffi": 3.1}
    for target in Paths(cfg).targets():
        row: dict[str, Any] = {"path": target.path, "graph": target.graph}
        for s in SCENARIOS:
            if not has_column(s, target.graph):
                continue
            graph_run = target.graph and not s.endswith(CMDBUF_OFF)
            v = base[target.path] * (1.0 if graph_run else 2.5)
            calls = cfg.unroll if s.startswith("unrolled") else cfg.fori if s.startswith("fori") else 1
            executes = None
            if target.path == "cutecall":
                executes = 0.0 if graph_run and s.startswith("unrolled") else float(calls)
            trials = [v * (1 + 0.05 * (i % 4)) for i in range(cfg.trials)]
            row[s] = dataclasses.asdict(Measurement.from_trials(
                trials, [t * (0.9 if graph_run else 0.3) for t in trials], reps=100,
                calls_per_invocation=calls, executes_per_invocation=executes))
        overhead[target.key] = row
    if "tvm_ffi" in cfg.paths:
        overhead["tvm_ffi"]["eager"] = dataclasses.asdict(Measurement.failed("ImportError: no tvm_ffi"))
    bw = {"cutecall": {"gbps": 3000.1, "ms_per_call": 0.7157, "output_matches_input": True},
          "cutlass_jax": {"error": "RuntimeError: example"},
          "xla": {"gbps": 2950.0, "ms_per_call": 0.728, "output_matches_input": True}}
    return {"meta": {"dry_run": True, "config": dataclasses.asdict(cfg)},
            "overhead": overhead, "bandwidth": bw}


def write_json(path: str, data: dict[str, Any]) -> None:
    if path == "-":
        print(json.dumps(data, indent=1))
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=1) + "\n")
    log(f"[bench] wrote {p}")


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
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
    deadline = Deadline(cfg.budget_s)
    paths = Paths(cfg)
    overhead = run_overhead(cfg, paths, CHILD_SCENARIOS, (True,), deadline, suffix=CMDBUF_OFF)
    print(CHILD_MARKER + json.dumps({"overhead": overhead, "XLA_FLAGS": os.environ.get("XLA_FLAGS")}),
          flush=True)
    return 0


def check_backend(allow_cpu: bool) -> str | None:
    """None if JAX has a GPU (or CPU is allowed), else why not."""
    import jax

    try:
        backend = jax.default_backend()
    except Exception as exc:  # noqa: BLE001
        return short_error(exc)
    if backend != "gpu" and not allow_cpu:
        return f"JAX backend is {backend!r}, not 'gpu' (use --allow-cpu to run anyway, --dry-run for tables)"
    return None


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
        failed = any("error" in r or any("error" in v for v in r.values() if isinstance(v, dict))
                     for r in low.values())
        return 1 if failed else 0

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
