"""Autotuning: pick the fastest of several kernel configurations per key,
and remember the winner across processes.

    gemm = cutecall.autotune(
        lambda tile_n, stages: cutecall.cutlass_call(
            make_gemm(tile_n, stages), output_shape_dtype=...),
        configs=[dict(tile_n=n, stages=s) for n in (64, 128, 256) for s in (2, 3)],
        key=lambda a, b: (a.shape, b.shape, str(a.dtype)))
    c = gemm(a, b)          # JAX (also under jit) or torch tensors

On the first call for a key the tuner builds every candidate
(``build(**config)``), compiles it, times it on the device with warm-up and
repetitions, and keeps the fastest. Candidates that fail to compile or to run
are skipped, and reported in ``tuned.report(key)`` and the ``cutecall`` log.
Under ``jax.jit`` tuning happens when the call is first traced, on random
inputs of the traced shapes, as jax-triton's autotuner does. In torch it
happens on the first call of a new key, on the call's own tensors.

The winner is stored in the artifact store, keyed by the content of
``build`` and the configs, the key, the device name and the versions of
cutecall, the DSL and CUDA. A later process picks it with zero timing runs
and zero compiles of the losers (``cutecall cache list`` shows it).

Environment: ``CUTECALL_AUTOTUNE=0`` uses the first config without tuning;
``CUTECALL_AUTOTUNE_CONFIG=<i>`` forces config i (for every tuner).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from typing import Any, Callable, Sequence

from ._driver import kernel_cache
from ._driver.fingerprint import fingerprint, source_digest
from ._driver.log import logger

__all__ = ["autotune", "Autotuned", "TuningResult"]

ENV_OFF, ENV_FORCE = "CUTECALL_AUTOTUNE", "CUTECALL_AUTOTUNE_CONFIG"


@dataclasses.dataclass(frozen=True)
class TuningResult:
    """How a key was decided: the winner's index, each candidate's time in
    µs (None for a failed one), errors, and where the decision came from
    ("tuned", "store", "forced" or "off")."""

    winner: int
    times_us: tuple
    errors: tuple
    source: str
    timing_runs: int = 0


class Autotuned:
    """The callable :func:`autotune` returns."""

    def __init__(self, build: Callable, configs: Sequence[dict], key: Callable,
                 warmup: int, rep: int, timer: Callable | None, name: str,
                 compile_workers: int = 0):
        if not callable(build):
            raise TypeError(f"cutecall.autotune: build must be callable, got {build!r}")
        if not callable(key):
            raise TypeError(f"cutecall.autotune: key must be callable (key(*args) -> "
                            f"hashable), got {key!r}")
        if not configs or not all(isinstance(c, dict) for c in configs):
            raise ValueError(f"cutecall.autotune: configs must be a non-empty list of "
                             f"dicts (keyword arguments of build), got {configs!r}")
        for what, n, least in (("warmup", warmup, 0), ("rep", rep, 1),
                               ("compile_workers", compile_workers, 0)):
            if isinstance(n, bool) or not isinstance(n, int) or n < least:
                raise ValueError(f"cutecall.autotune: {what} must be an int >= "
                                 f"{least}, got {n!r}")
        self.build, self.configs, self.key_fn = build, [dict(c) for c in configs], key
        self.warmup, self.rep, self.timer, self.name = warmup, rep, timer, name
        self.compile_workers = compile_workers
        self._candidates: dict[int, Any] = {}
        self._compiled_for: set = set()
        self._decided: dict[Any, TuningResult] = {}
        self._lock = threading.RLock()
        try:
            what = fingerprint(build, "autotune build")
        except (TypeError, ValueError):  # content it cannot describe: its source
            what = source_digest(build)
        self._content = hashlib.sha256(json.dumps(
            [what, [sorted(c.items()) for c in self.configs]],
            default=repr).encode()).hexdigest()

    def candidate(self, i: int):
        with self._lock:
            if i not in self._candidates:
                self._candidates[i] = self.build(**self.configs[i])
            return self._candidates[i]

    def report(self, *args) -> TuningResult | None:
        """The decision for the key of `args` (None: not decided yet)."""
        return self._decided.get(self.key_fn(*args))

    def __call__(self, *args):
        key = self.key_fn(*args)
        result = self._decided.get(key)
        if result is None:
            with self._lock:
                result = self._decided.get(key) or self._decide(key, args)
                self._decided[key] = result
        return self.candidate(result.winner)(*args)

    # -- deciding ---------------------------------------------------------------
    def _decide(self, key, args) -> TuningResult:
        forced = os.environ.get(ENV_FORCE)
        if forced is not None:
            index = _config_index(forced, len(self.configs))
            return TuningResult(index, (), (), "forced")
        if os.environ.get(ENV_OFF, "1").strip().lower() in ("0", "off", "false", "no"):
            return TuningResult(0, (), (), "off")
        device = _device_name(args)
        record_key = hashlib.sha256(
            json.dumps([self._content, repr(key), device]).encode()).hexdigest()
        stored = kernel_cache.load_record(record_key, device, "autotune")
        if stored is not None and stored.get("winner", -1) < len(self.configs):
            logger.info("autotune '%s': key %r: config %d from the store", self.name,
                        key, stored["winner"])
            return TuningResult(stored["winner"], tuple(stored["times_us"]),
                                tuple(stored["errors"]), "store")
        result = self._tune(args)
        kernel_cache.store_record(record_key, device, "autotune", {
            "autotune": self.name, "name": f"{self.name} (autotune winner)",
            "winner": result.winner,
            # JSON-able for the record (a dtype or an object config: its repr)
            "config": json.loads(json.dumps(self.configs[result.winner], default=repr)),
            "times_us": list(result.times_us), "errors": list(result.errors),
            "key": repr(key)})
        return result

    def _compile_in_workers(self, args) -> None:
        """JAX: every candidate lowered in worker processes first, so the
        timing loop loads them from the store (``build`` must pickle). Once
        per tuner and argument dtypes: a later key's candidates are the same
        compiles unless its extents fall in another divisibility class, and
        those few compile in this process."""
        import functools

        import jax
        from . import _warmup
        dtypes = tuple(str(getattr(x, "dtype", type(x).__name__)) for x in args)
        if dtypes in self._compiled_for:
            return
        self._compiled_for.add(dtypes)
        specs = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) if hasattr(x, "dtype")
                      else x for x in args)
        tasks = [functools.partial(_compile_candidate, self.build, c, specs)
                 for c in self.configs]
        report = _warmup.warmup(tasks, workers=self.compile_workers,
                                preload=_warmup.defining_modules([self.build]))
        logger.info("autotune '%s': %s", self.name, str(report).splitlines()[0])

    def _tune(self, args) -> TuningResult:
        timer = self.timer or _default_timer(args)
        if not any(_is_torch(x) for x in args):
            if self.compile_workers > 1:
                self._compile_in_workers(args)
            args = _concrete_jax(args)  # once per key, not once per candidate
        times, errors, runs = [], [], 0
        for i, config in enumerate(self.configs):
            try:
                us = timer(self.candidate(i), args, self.warmup, self.rep)
                runs += 1
                times.append(float(us))
                errors.append(None)
            except Exception as e:  # noqa: BLE001 (a failed candidate is skipped)
                times.append(None)
                errors.append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                logger.info("autotune '%s': config %d %s failed: %s", self.name, i,
                            config, errors[-1])
        ok = [i for i, t in enumerate(times) if t is not None]
        if not ok:
            raise RuntimeError(f"cutecall.autotune '{self.name}': every config failed: "
                               + "; ".join(f"{self.configs[i]}: {e}"
                                           for i, e in enumerate(errors)))
        winner = min(ok, key=lambda i: times[i])
        logger.info("autotune '%s': config %d %s wins (%.1f us; %s)", self.name, winner,
                    self.configs[winner], times[winner],
                    ", ".join("failed" if t is None else f"{t:.1f}" for t in times))
        return TuningResult(winner, tuple(times), tuple(errors), "tuned", runs)


def _compile_candidate(build, config, specs):
    from ._warmup import _lower
    _lower(build(**config), specs)


def _config_index(text: str, n: int) -> int:
    try:
        index = int(text)
    except ValueError:
        index = -1
    if not 0 <= index < n:
        raise ValueError(f"cutecall.autotune: {ENV_FORCE}={text!r} is not a config "
                         f"index in [0, {n})")
    return index


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _device_name(args) -> str:
    for x in args:
        if _is_torch(x) and getattr(x, "is_cuda", False):
            import torch
            return torch.cuda.get_device_name(x.device)
    import jax
    try:
        return jax.devices("cuda")[0].device_kind
    except RuntimeError:
        return "no-gpu"


def _default_timer(args) -> Callable:
    return _time_torch if any(_is_torch(x) for x in args) else _time_jax


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


def _concrete_jax(args) -> tuple:
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
        return _time_jax_chains(fn, _concrete_jax(args), warmup, rep)


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


def autotune(build: Callable, *, configs: Sequence[dict], key: Callable,
             warmup: int = 3, rep: int = 20, timer: Callable | None = None,
             name: str | None = None, compile_workers: int = 0) -> Autotuned:
    """Returns a callable that runs the fastest ``build(**config)`` per key.

    Args:
      build: ``build(**config)`` returns a callable kernel: a
        ``cutecall.cutlass_call``, a ``cutecall.torch.kernel``, or any
        function of them.
      configs: the candidate configurations (dicts of keyword arguments).
      key: ``key(*args)`` returns the hashable part of a call the choice
        depends on (e.g. shapes and dtypes of some arguments).
      warmup, rep: untimed and timed calls per candidate.
      timer: ``timer(fn, args, warmup, rep) -> µs`` (default: CUDA events for
        torch tensors, chained jitted calls for JAX arrays).
      name: used in logs and ``cutecall cache list`` (default: build's name).
      compile_workers: JAX: compile the candidates in this many worker
        processes first (``cute.compile`` is not thread-safe); ``build``
        must then be picklable (a module-level function). 0: in-process.
    """
    return Autotuned(build, configs, key, warmup, rep, timer,
                     name or getattr(build, "__qualname__", "autotune"), compile_workers)
