"""Chains of training steps in one executable, compiled once with given XLA
options, timed three ways.

XLA records an executable's CUDA graphs on its first execution (or on the
second, after a run of the plain thunks, when a command needs
initialization), replays them afterwards, and re-records the commands whose
buffers moved (a cutecall call is re-recorded by stream capture of its FFI
handler). Compiling an executable evicts the graphs of all others.
Per-step time is the difference of a k2- and a k1-step chain (dispatch
cancels):

  cold     the second execution of each chain, run short-long after one
           execution each (bench/timing.jax_wall_us's method, which the
           first numbers of issue 35 used)
  alt      the same alternation after ``warm`` more executions of both
  steady   each chain run ``repeat`` times in a row (the first of a block
           not timed), min per chain: nothing alternates
  loop     a Python loop of the jitted step, weights donated: how training
           runs (dispatch included)

with cutecall's FFI execute count per step in each (the handler runs only
while XLA records a graph, or every step without command buffers).
"""

from __future__ import annotations

import statistics
import time


def chain(step, k: int, feed: bool = True):
    """A function running `step` k times on (w, x, y), every step's weights
    a result (nothing is dead code). `feed`: each step takes the previous
    step's weights, as a training loop; otherwise every step starts from the
    same weights (bench/timing.jax_chain's harness: independent steps, whose
    communication XLA may overlap with the next step's compute)."""
    from jax import lax

    def run(w, x, y):
        outs, w0 = [], w
        for i in range(k):
            if i:
                w, x, y = lax.optimization_barrier((w if feed else w0, x, y))
            outs.append(step(w, x, y))
            w = outs[-1]
        return outs
    return run


def compile_chain(step, args, k: int, options: dict | None = None, feed: bool = True):
    """The k-step chain on `args`, lowered and compiled with XLA `options`
    (DebugOptions fields, e.g. {"xla_gpu_enable_command_buffer": ""});
    returns a callable that runs it once and waits."""
    import jax
    compiled = jax.jit(chain(step, k, feed)).lower(*args).compile(
        compiler_options=options or {})

    def run():
        jax.block_until_ready(compiled(*args))
    return run


def _seconds(run) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def per_step_us(short, long, k1: int, k2: int) -> float:
    return (_seconds(long) - _seconds(short)) / (k2 - k1) * 1e6


def _block_s(run, repeat: int) -> float:
    """min seconds of `repeat` runs after one untimed run (the switch-in)."""
    run()
    return min(_seconds(run) for _ in range(repeat))


def donated_loop(step, args, options: dict | None = None):
    """run(n): n steps of the jitted `step` with the weights donated (each
    step takes the previous one's), waiting for the last; compiled with XLA
    `options` on a copy of `args`' weights."""
    import jax
    w, x, y = args
    state = [jax.tree.map(lambda a: a.copy(), w)]  # donated below: keep the caller's
    f = jax.jit(step, donate_argnums=0).lower(state[0], x, y).compile(
        compiler_options=options or {})

    def run(n: int):
        for _ in range(n):
            state[0] = f(state[0], x, y)
        jax.block_until_ready(state[0])
    run.compiled = f
    return run


def loop_us(step, args, *, steps: int = 20, trials: int = 3, options: dict | None = None,
            executes=None, run=None) -> dict:
    """{"loop_us", "loop_median_us", "loop_all", "executes_per_step_loop"}: a
    Python loop of the jitted step with the weights donated, as a training
    loop runs (wall time per step over `steps` steps after 3 warm ones, best
    and median of trials).
    `run`: a :func:`donated_loop` to time instead of compiling one."""
    count = executes or (lambda: 0)
    run = run or donated_loop(step, args, options)
    run(3)
    runs, e0 = [], count()
    for _ in range(trials):
        t0 = time.perf_counter()
        run(steps)
        runs.append((time.perf_counter() - t0) / steps * 1e6)
    out = {"loop_us": min(runs), "loop_median_us": statistics.median(runs), "loop_all": runs}
    if executes:
        out["executes_per_step_loop"] = (count() - e0) / (steps * trials)
    return out


def measure(step, args, *, k1: int = 2, k2: int = 8, warm: int = 3, trials: int = 3,
            repeat: int = 3, options: dict | None = None, executes=None,
            feed: bool = True, loop: bool = True, loop_steps: int = 20) -> dict:
    """{"cold_us", "alt_us", "warm_us" (steady, best of trials), "warm_all",
    "compile_s"} of `step` on `args`, and with `executes` (a function
    returning cutecall's execute count) "executes_per_step_{first,cold,alt,
    warm}"; with `loop`, :func:`loop_us`'s numbers too. `feed`: see
    :func:`chain`."""
    count = executes or (lambda: 0)
    t0 = time.perf_counter()
    short = compile_chain(step, args, k1, options, feed)
    long = compile_chain(step, args, k2, options, feed)
    compile_s = time.perf_counter() - t0
    e = [count()]
    short(), long()                           # first executions
    e.append(count())
    cold = per_step_us(short, long, k1, k2)   # second executions
    e.append(count())
    for _ in range(warm):
        short(), long()
    e.append(count())
    alt = min(per_step_us(short, long, k1, k2) for _ in range(trials))
    e.append(count())
    steady = []
    for _ in range(trials):
        steady.append((_block_s(long, repeat) - _block_s(short, repeat)) / (k2 - k1) * 1e6)
    e.append(count())
    out = {"cold_us": cold, "alt_us": alt, "warm_us": min(steady), "warm_all": steady,
           "compile_s": compile_s}
    if executes:
        steps = k1 + k2
        out.update(executes_per_step_first=(e[1] - e[0]) / steps,
                   executes_per_step_cold=(e[2] - e[1]) / steps,
                   executes_per_step_alt=(e[4] - e[3]) / (steps * trials),
                   executes_per_step_warm=(e[5] - e[4]) / (steps * (repeat + 1) * trials))
    if loop:
        out.update(loop_us(step, args, steps=loop_steps, trials=trials, options=options,
                           executes=executes))
    return out


def cutecall_executes():
    """cutecall's process-wide count of FFI execute-stage runs."""
    from cutecall import _core
    return _core.call_stats()["executes"]
