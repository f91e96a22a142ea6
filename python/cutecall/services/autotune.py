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

While it tunes, a ``tqdm`` bar of the candidates (each compiled, if it is
new, then timed) shows on stderr when it is a terminal; ``CUTECALL_PROGRESS=1``
always shows it, ``0`` never (``compile_workers`` adds warm-up's bar).

Environment: ``CUTECALL_AUTOTUNE=0`` uses the first config without tuning;
``CUTECALL_AUTOTUNE_CONFIG=<i>`` forces config i (for every tuner).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from typing import Any, Callable, Sequence

from .._driver import progress
from .._driver.store import records
from .._driver.fingerprint import fingerprint
from .._driver.source_digest import source_digest
from .timing import NoGPU, concrete_jax, default_timer, device_name, is_torch
from .._driver.log import logger

__all__ = ["autotune", "Autotuned", "TuningResult"]

ENV_OFF, ENV_FORCE = "CUTECALL_AUTOTUNE", "CUTECALL_AUTOTUNE_CONFIG"


@dataclasses.dataclass(frozen=True)
class TuningResult:
    """How a key was decided: the winner's index, each candidate's time in
    µs (None for a failed one; the mean of two for those timed again, as
    close to the fastest), errors, and where the decision came from
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
        device = device_name(args)
        record_key = hashlib.sha256(
            json.dumps([self._content, repr(key), device]).encode()).hexdigest()
        stored = records.load_record(record_key, device, "autotune")
        if stored is not None and stored.get("winner", -1) < len(self.configs):
            logger.info("autotune '%s': key %r: config %d from the store", self.name,
                        key, stored["winner"])
            return TuningResult(stored["winner"], tuple(stored["times_us"]),
                                tuple(stored["errors"]), "store")
        # The timer first, before compiling any candidate: the default one
        # needs a GPU and says so at once.
        try:
            timer = self.timer or default_timer(args)
        except NoGPU as e:
            raise RuntimeError(
                f"cutecall.autotune '{self.name}': timing its {len(self.configs)} configs "
                f"{e}. On a machine that only compiles, set {ENV_OFF}=0 (config 0) or "
                f"{ENV_FORCE}=<index>, or pass timer=") from None
        result = self._tune(args, timer)
        records.store_record(record_key, device, "autotune", {
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
        from . import warmup as _warmup, workers as _workers
        dtypes = tuple(str(getattr(x, "dtype", type(x).__name__)) for x in args)
        if dtypes in self._compiled_for:
            return
        self._compiled_for.add(dtypes)
        specs = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) if hasattr(x, "dtype")
                      else x for x in args)
        tasks = [functools.partial(_compile_candidate, self.build, c, specs)
                 for c in self.configs]
        report = _warmup.warmup(tasks, workers=self.compile_workers,
                                preload=_workers.defining_modules([self.build]))
        logger.info("autotune '%s': %s", self.name, str(report).splitlines()[0])

    def _tune(self, args, timer) -> TuningResult:
        if not any(is_torch(x) for x in args):
            if self.compile_workers > 1:
                self._compile_in_workers(args)
            args = concrete_jax(args)  # once per key, not once per candidate
        times, errors, runs = [], [], 0
        with progress.bar(len(self.configs), f"cutecall autotune '{self.name}'",
                          "config") as bar:
            for i, config in enumerate(self.configs):
                try:
                    us = timer(self.candidate(i), args, self.warmup, self.rep)
                    runs += 1
                    times.append(float(us))
                    errors.append(None)
                except Exception as e:  # noqa: BLE001 (a failed candidate is skipped)
                    times.append(None)
                    errors.append(f"{type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}")
                    logger.info("autotune '%s': config %d %s failed: %s", self.name, i,
                                config, errors[-1])
                bar.update(1)
            ok = [i for i, t in enumerate(times) if t is not None]
            if not ok:
                raise RuntimeError(f"cutecall.autotune '{self.name}': every config "
                                   f"failed: " + "; ".join(f"{self.configs[i]}: {e}"
                                                           for i, e in enumerate(errors)))
            runs += self._look_again(timer, args, times, bar)
        winner = min(ok, key=lambda i: times[i])
        logger.info("autotune '%s': config %d %s wins (%.1f us; %s)", self.name, winner,
                    self.configs[winner], times[winner],
                    ", ".join("failed" if t is None else f"{t:.1f}" for t in times))
        return TuningResult(winner, tuple(times), tuple(errors), "tuned", runs)


    def _look_again(self, timer, args, times: list, bar) -> int:
        """Times each candidate within CLOSE of the fastest once more, and
        keeps the mean of its two times, so that one noisy measurement does
        not pick the winner among close ones. Returns the timing runs made."""
        bound = min(t for t in times if t is not None) * (1 + CLOSE)
        close = [i for i, t in enumerate(times) if t is not None and t <= bound]
        if len(close) < 2:
            return 0
        bar.set_postfix_str(f"timing the {len(close)} closest again")
        runs = 0
        for i in close:
            try:
                again = float(timer(self.candidate(i), args, self.warmup, self.rep))
            except Exception as e:  # noqa: BLE001 (the first time stands)
                logger.info("autotune '%s': config %d timed again failed: %s",
                            self.name, i, e)
                continue
            times[i] = (times[i] + again) / 2
            runs += 1
        return runs


CLOSE = 0.03   # candidates this close to the fastest are timed twice


def _compile_candidate(build, config, specs):
    from .warmup import _lower
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
