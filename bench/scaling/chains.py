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
           not timed), min per chain: nothing alternates, as in a training
           loop that runs one step function

with cutecall's FFI execute count per step in each (the handler runs only
while XLA records a graph, or every step without command buffers).
"""

from __future__ import annotations

import time


def chain(step, k: int):
    """A function running `step` k times on (w, x, y): each step takes the
    previous step's weights (a real training loop), and every step's weights
    are results (nothing is dead code)."""
    from jax import lax

    def run(w, x, y):
        outs = []
        for i in range(k):
            if i:
                w, x, y = lax.optimization_barrier((w, x, y))
            w = step(w, x, y)
            outs.append(w)
        return outs
    return run


def compile_chain(step, args, k: int, options: dict | None = None):
    """The k-step chain on `args`, lowered and compiled with XLA `options`
    (DebugOptions fields, e.g. {"xla_gpu_enable_command_buffer": ""});
    returns a callable that runs it once and waits."""
    import jax
    compiled = jax.jit(chain(step, k)).lower(*args).compile(compiler_options=options or {})

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


def measure(step, args, *, k1: int = 2, k2: int = 8, warm: int = 3, trials: int = 3,
            repeat: int = 3, options: dict | None = None, executes=None) -> dict:
    """{"cold_us", "alt_us", "warm_us" (steady, best of trials), "warm_all",
    "compile_s"} of `step` on `args`, and with `executes` (a function
    returning cutecall's execute count) "executes_per_step_{first,cold,alt,
    warm}"."""
    count = executes or (lambda: 0)
    t0 = time.perf_counter()
    short = compile_chain(step, args, k1, options)
    long = compile_chain(step, args, k2, options)
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
    return out


def cutecall_executes():
    """cutecall's process-wide count of FFI execute-stage runs."""
    from cutecall import _core
    return _core.call_stats()["executes"]
