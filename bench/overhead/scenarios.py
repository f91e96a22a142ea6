"""The launch-overhead benchmark's scenarios (how a path's call is jitted
and invoked: ``run.py``'s docstring) and the run over every (target,
scenario) cell: ``run_overhead``, and ``merge_child`` for the cells the
command-buffers-off child measured."""

from __future__ import annotations

import dataclasses
import importlib
import time
from typing import Any, Callable

from bench.overhead.config import CHILD_SCENARIOS, CMDBUF_OFF, Config
from bench.harness import SKIPPED, Deadline, Measurement, Runner, log, run_trials, short_error
from bench.overhead.paths import Paths, Target


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


def prepare(name: str, call: Callable, x: Any, cfg: Config,
            stats: Callable[[], dict[str, Any]] | None) -> Runner:
    spec = SCENARIO_SPECS[name]
    fn, calls = spec.build(call, cfg)
    if spec.feedback:
        x = input_array(cfg.n)  # donated: this cell's own buffer
    return Runner(fn, x, calls, cfg, feedback=spec.feedback, stats=stats)


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
    ``harness.run_trials``). Otherwise each cell is prepared and timed on its
    own, target after target."""
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


def merge_child(overhead: dict[str, dict[str, Any]], child: dict[str, Any]) -> None:
    """The command-buffers-off child's cells into the graph-capable rows (a
    failed child: its error in each of those cells)."""
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
