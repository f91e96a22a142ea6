"""How ``cutecall.autotune`` times a candidate on the device: CUDA events
for torch; for JAX, the difference of two jitted chains of calls, run
(not traced) even while the caller's jit traces. Example::

    from cutecall.services.timing import default_timer
    us = default_timer((a, b))(kernel, (a, b), warmup=3, rep=20)
"""

from __future__ import annotations

import time
from typing import Callable


def is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


NO_GPU = "no-gpu"


def device_name(args) -> str:
    """The GPU the arguments' kernels run on, or NO_GPU."""
    for x in args:
        if is_torch(x) and getattr(x, "is_cuda", False):
            import torch
            return torch.cuda.get_device_name(x.device)
    if any(is_torch(x) for x in args):
        return NO_GPU  # torch tensors, none on a GPU (and maybe no JAX)
    import jax
    try:
        return jax.devices("cuda")[0].device_kind
    except RuntimeError:
        return NO_GPU


class NoGPU(RuntimeError):
    """Timing needs a GPU and none is visible (the message completes
    "timing ... ")."""


def default_timer(args) -> Callable:
    """CUDA-event timing for torch tensors, chained calls in one jit for
    JAX; NoGPU where no GPU is visible to run them."""
    if device_name(args) == NO_GPU:
        raise NoGPU("needs a GPU, and none is visible")
    return _time_torch if any(is_torch(x) for x in args) else _time_jax


def _time_torch(fn, args, warmup: int, rep: int) -> float:
    """µs per call: CUDA events around `rep` back-to-back calls."""
    import torch
    for _ in range(warmup):
        fn(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rep):
        fn(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / rep


def concrete_jax(args) -> tuple:
    """`args` with every tracer or shape-only array replaced by a device
    array of its shape and dtype: standard normal floats, zeros otherwise
    (concrete JAX and NumPy arrays are kept, on the device)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    rng = np.random.default_rng(0)

    def concrete(x):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            return x
        if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
            return x
        if isinstance(x, np.ndarray):  # data the caller gave: kept
            return jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.floating):
            return jnp.asarray(rng.standard_normal(x.shape, np.float32), x.dtype)
        return jnp.zeros(x.shape, x.dtype)
    with jax.ensure_compile_time_eval():
        return tuple(concrete(x) for x in args)


TRIALS = 5   # timed runs of each chain


def _time_jax(fn, args, warmup: int, rep: int) -> float:
    """µs per call of `fn` on concrete random inputs shaped like `args`
    (tracers under jit): the wall-time difference of one jit running `fn`
    `rep` times in sequence and one running it ``rep // 4`` times, over the
    difference in calls. Each run pays JAX's dispatch once, so it cancels;
    what is left is the GPU's time whenever the GPU is the bottleneck. Each
    chain's fastest of TRIALS runs; `warmup` untimed runs of each first."""
    import jax
    # Tuning runs while the caller's jit traces: without this, the chains
    # below would be traced into the caller's program, never run, and the
    # "time" would be tracing time.
    with jax.ensure_compile_time_eval():
        return _time_jax_chains(fn, concrete_jax(args), warmup, rep)


def _time_jax_chains(fn, inputs, warmup: int, rep: int) -> float:
    import jax
    from jax import lax
    where = [i for i, x in enumerate(inputs) if isinstance(x, jax.Array)]

    def chain(k: int):
        def run(*arrays):
            outs = []
            for _ in range(k):
                # Fresh operands per call, so XLA neither merges the calls
                # nor hoists one; every output is returned, so none is dropped.
                arrays = lax.optimization_barrier(arrays)
                full = list(inputs)
                for i, a in zip(where, arrays):
                    full[i] = a
                outs.append(fn(*full))
            return outs
        f = jax.jit(run)
        arrays = [inputs[i] for i in where]

        def call():
            out = jax.block_until_ready(f(*arrays))
            if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(out)):
                raise RuntimeError("cutecall.autotune: the timed calls were traced, "
                                   "not run (is a trace active?)")
        return call

    short_k = max(1, rep // 4)
    long_k = max(rep, short_k + 1)
    short, long = chain(short_k), chain(long_k)
    for _ in range(max(1, warmup)):
        short(), long()
    # The fastest run of each chain, then their difference. (The fastest
    # difference instead would reward a run whose short chain was slowed by
    # a stall: one such run made a config look 25% faster than it is.)
    fastest = {short: float("inf"), long: float("inf")}
    for _ in range(TRIALS):
        for run in (short, long):
            t0 = time.perf_counter()
            run()
            fastest[run] = min(fastest[run], time.perf_counter() - t0)
    return max(fastest[long] - fastest[short], 0.0) / (long_k - short_k) * 1e6
