"""How the scaling benchmark times a training step: a Python loop of the
jitted step with the weights donated, as a training loop runs (dispatch
included), compiled once with XLA's defaults (command buffers on), and
cutecall's FFI execute count per step beside it (the handler runs only
while XLA records a graph, or every step without command buffers).
"""

from __future__ import annotations

import statistics
import time


def donated_loop(step, args, options: dict | None = None):
    """run(n): n steps of the jitted `step` with the weights donated (each
    step takes the previous one's), waiting for the last; compiled with XLA
    `options` (DebugOptions fields) on a copy of `args`' weights."""
    import jax
    w, x, y = args
    state = [jax.tree.map(lambda a: a.copy(), w)]  # donated below: keep the caller's
    f = jax.jit(step, donate_argnums=0).lower(state[0], x, y).compile(
        compiler_options=options or {})

    def run(n: int):
        for _ in range(n):
            state[0] = f(state[0], x, y)
        jax.block_until_ready(state[0])
    return run


def loop_us(step, args, *, steps: int = 20, trials: int = 5, warm: int = 3,
            executes=None) -> dict:
    """{"us", "median_us", "trials_us", "compile_s"} of `step` on `args`:
    wall time per step over `steps` steps after `warm` untimed ones, best
    and median of `trials`; with `executes` (a function returning cutecall's
    execute count) also "executes_per_step"."""
    count = executes or (lambda: 0)
    t0 = time.perf_counter()
    run = donated_loop(step, args)
    compile_s = time.perf_counter() - t0
    run(warm)
    runs, e0 = [], count()
    for _ in range(trials):
        t0 = time.perf_counter()
        run(steps)
        runs.append((time.perf_counter() - t0) / steps * 1e6)
    out = {"us": min(runs), "median_us": statistics.median(runs), "trials_us": runs,
           "compile_s": round(compile_s, 1)}
    if executes:
        out["executes_per_step"] = (count() - e0) / (steps * trials)
    return out


def cutecall_executes():
    """cutecall's process-wide count of FFI execute-stage runs."""
    from cutecall import _core
    return _core.call_stats()["executes"]
