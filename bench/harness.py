"""The benchmarks' shared harness: trials of a jitted call (compile, warm up,
calibrate, time; interleaved across cells), their statistics, the time
budget, the environment's versions, JSON output, text tables, the test
corpus as a package, and a benchmark again in a child process with other
``XLA_FLAGS``.

Imported as ``bench.harness`` by the benchmarks (``python -m
bench.<name>.run`` from the repository root; ``bench/timing.py`` holds the
device-time helpers). Nothing here imports JAX until a function needs it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

SKIPPED = "skipped: time budget spent"
CHILD_MARKER = "@@CUTECALL_BENCH_CHILD_JSON@@"


# The repository's root: the benchmarks run from it (``python -m bench.NAME.run``).
ROOT = Path(__file__).resolve().parents[1]
# The QuACK/FA4 corpus (the cases tests/external checks and bench/external
# times) lives in tests/external/corpus, out of the wheel; corpus_checks
# (outputs compared) beside it.
CORPUS_PARENT = ROOT / "tests" / "external"


def _load(name: str, path: Path, package: bool) -> None:
    """Registers the module or package at `path` as ``name`` (once)."""
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        name, path / "__init__.py" if package else path,
        submodule_search_locations=[str(path)] if package else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def use_corpus() -> None:
    """Makes the test corpus importable as ``corpus`` (``from corpus import
    quack_corpus``) and its output checks as ``corpus_checks``, from their
    files in tests/external (out of the wheel)."""
    _load("corpus", CORPUS_PARENT / "corpus", package=True)
    _load("corpus_checks", CORPUS_PARENT / "corpus_checks.py", package=False)


def log(msg: str) -> None:
    """Progress to stderr (stdout holds the tables)."""
    print(msg, file=sys.stderr, flush=True)


def short_error(exc: BaseException, limit: int = 600) -> str:
    """``Type: message`` on one line, at most ``limit`` characters."""
    text = f"{type(exc).__name__}: {exc}".strip()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Deadline:
    """A run's time budget: work that would start after it is skipped."""

    def __init__(self, seconds: float):
        self.t_end = time.monotonic() + seconds

    def left(self) -> float:
        return self.t_end - time.monotonic()

    def expired(self) -> bool:
        return self.left() <= 0


# --------------------------------------------------------------------------
# one measured cell
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Measurement:
    """One measured cell, microseconds per call. ``us_per_call`` (the median
    trial) is None when it failed, and ``error`` says why. Its fields, as
    ``dataclasses.asdict``, are the JSON record of a cell."""

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
        """Median and min of the trials (and the median dispatch time)."""
        return cls(
            us_per_call=round(statistics.median(trials_us), 4),
            min_us_per_call=round(min(trials_us), 4),
            dispatch_us=round(statistics.median(dispatch_trials_us), 4),
            trials_us=[round(t, 4) for t in trials_us],
            dispatch_trials_us=[round(t, 4) for t in dispatch_trials_us],
            **fields,
        )


def pick_reps(one_s: float, cfg: Any, cap: int | None = None) -> int:
    """Invocations per trial so that one trial lasts about ``cfg.trial_ms``
    (at most ``cap`` or ``cfg.max_reps``), given one invocation's seconds."""
    target = cfg.trial_ms / 1e3
    reps = int(target / max(one_s, 1e-7))
    return max(1, min(reps, cap or cfg.max_reps))


def _block(y: Any) -> None:
    import jax

    jax.block_until_ready(y)


class Runner:
    """One cell made ready to time: the constructor compiles (the first
    invocation, kept as ``compile_s``), warms up (``cfg.warmup``
    invocations) and calibrates ``reps`` (``pick_reps``); each ``trial()``
    times ``reps`` back-to-back invocations, then one block on the last
    result. ``cfg``: anything with ``warmup``, ``trial_ms`` and ``max_reps``.

    ``calls``: calls per invocation (per-call times divide by it).
    ``feedback``: each invocation's output is the next one's input (for a
    jit that donates its argument). ``stats``: a counter snapshot function,
    read around every trial; the deltas are summed per counter."""

    def __init__(self, fn: Callable[[Any], Any], x: Any, calls: int, cfg: Any, *,
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
        """The cell's Measurement; ``executes_per_invocation`` is the
        ``executes`` counter's delta per timed invocation, where counted."""
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
    t % n, so slow drifts hit every runner alike; a runner that fails keeps
    its error and leaves the rotation. Stops when the deadline passes."""
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


def measure(fn: Callable[[Any], Any], x: Any, calls: int, cfg: Any,
            *, trials: int, reps: int | None = None) -> Measurement:
    """Compile, warm up, calibrate, then time ``trials`` trials of ``reps``."""
    runner = Runner(fn, x, calls, cfg, reps=reps)
    for _ in range(trials):
        runner.trial()
    return runner.result()


# --------------------------------------------------------------------------
# the backend, and a benchmark again in a child process
# --------------------------------------------------------------------------


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


def module_command(module: str, *args: str) -> list[str]:
    """The command line running ``python -m module args`` with this
    interpreter; run it with ``cwd=ROOT`` (where ``bench`` is a package)."""
    return [sys.executable, "-m", module, *args]


def run_child(module: str, args: list[str], *, xla_flag: str, timeout: float,
              what: str) -> dict[str, Any]:
    """Runs ``python -m module args`` (from ROOT) in a child process whose ``XLA_FLAGS`` gain
    ``xla_flag`` (and which does not preallocate GPU memory), at most
    ``timeout`` seconds. Returns the dict the child passed to
    ``reply_to_parent``, or ``{"error": ...}``. The child's stderr (its
    progress) is copied to this process's stderr when it ends."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + xla_flag).strip()
    # Never fight the parent (or anyone) for preallocated GPU memory.
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    cmd = module_command(module, *args)
    log(f"[bench] child ({what}): XLA_FLAGS={env['XLA_FLAGS']!r}, timeout {timeout:.0f}s")
    try:
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        sys.stderr.write(err)
        return {"error": f"child timed out after {timeout:.0f}s"}
    sys.stderr.write(proc.stderr)  # its progress lines, after the fact
    for line in proc.stdout.splitlines():
        if line.startswith(CHILD_MARKER):
            return json.loads(line[len(CHILD_MARKER):])
    tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])
    return {"error": f"child exited {proc.returncode} without results: {tail}"}


def reply_to_parent(data: dict[str, Any]) -> None:
    """In a child started by ``run_child``: hand ``data`` (JSON) back."""
    print(CHILD_MARKER + json.dumps(data), flush=True)
