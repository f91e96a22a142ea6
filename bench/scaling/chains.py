"""Chains of training steps in one executable, compiled once with given XLA
options, timed cold and warm.

XLA runs a command buffer's plain thunks on an executable's first
execution, records and instantiates its CUDA graphs on the second (host
work, before the GPU starts), and replays them afterwards, re-recording
only commands whose buffers moved. Compiling an executable evicts the
graphs of all others. So:

  cold  the second execution of each chain (what bench/timing.jax_wall_us
        times: graph creation included)
  warm  after ``warm`` more executions of both chains (steady state, what a
        training loop runs)

Per-step time is the difference of a k2- and a k1-step chain (dispatch
cancels), best of ``trials``.
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


def measure(step, args, *, k1: int = 2, k2: int = 8, warm: int = 3, trials: int = 3,
            options: dict | None = None, executes=None) -> dict:
    """{"cold_us", "warm_us" (best of trials), "warm_all", "compile_s",
    "executes_per_step_cold", "executes_per_step_warm"} of `step` on `args`.
    `executes`: a function returning cutecall's execute count (the FFI
    handler's runs: with command buffers, runs happen only while XLA records
    a graph), or None."""
    t0 = time.perf_counter()
    short = compile_chain(step, args, k1, options)
    long = compile_chain(step, args, k2, options)
    compile_s = time.perf_counter() - t0
    short(), long()                        # execution 1: XLA's thunk warm-up
    e0 = executes() if executes else 0
    cold = per_step_us(short, long, k1, k2)   # execution 2: graphs recorded
    e1 = executes() if executes else 0
    for _ in range(warm):
        short(), long()
    e2 = executes() if executes else 0
    runs = []
    for _ in range(trials):
        runs.append(per_step_us(short, long, k1, k2))
    e3 = executes() if executes else 0
    steps = k1 + k2
    out = {"cold_us": cold, "warm_us": min(runs), "warm_all": runs, "compile_s": compile_s}
    if executes:
        out["executes_per_step_cold"] = (e1 - e0) / steps
        out["executes_per_step_warm"] = (e3 - e2) / (steps * trials)
    return out


def cutecall_executes():
    """cutecall's process-wide count of FFI execute-stage runs."""
    from cutecall import _core
    return _core.call_stats()["executes"]
