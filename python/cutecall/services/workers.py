"""Warm-up's worker processes: how they start (forked from this process
when that is safe, else from a fork server), what each imports and runs,
and the pool that hands them the tasks.

Forking this process is the fast way. The workers inherit every module it
has imported, so JAX, torch, the CuTe DSL and the kernels' packages are not
imported a second time (10–17 s for JAX, torch, the DSL, FA4 and QuACK
on an H100 host). So ``start="auto"`` forks, on Linux, unless JAX has
started a backend here (``jax.devices()`` and the first array start one):
XLA's clients and their threads do not survive ``fork()``, and a worker's
lowering would reach them.

A CUDA context here does not stop it (importing FA4 or QuACK initializes
CUDA through torch): workers never call CUDA. They compile for an arch
given to them and run JAX on its CPU backend; a worker that touched CUDA
anyway would get an error (torch raises in a forked child), not a hang.

Otherwise the workers fork from a ``multiprocessing`` fork server: a clean
interpreter that imports the modules once, before the first worker forks.
The choice and its reason are logged (``CUTECALL_LOG=info``).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import importlib
import multiprocessing
import os
import sys
import time
import warnings
from typing import Sequence

from .._driver import progress
from .._driver.log import logger

START_METHODS = ("auto", "fork", "forkserver")


def fork_blocker() -> str | None:
    """Why this process must not fork compile workers, or None if it may."""
    if not sys.platform.startswith("linux"):
        return f"fork() is unsafe on {sys.platform}"
    if "jax" in sys.modules:
        from jax._src import distributed, xla_bridge
        if xla_bridge.backends_are_initialized():
            return "JAX has started its backends in this process"
        if distributed.global_state.client is not None:
            return ("jax.distributed is initialized in this process (a fork cancels "
                    "its coordination calls)")
    return None


def check_start(start: str) -> None:
    if start not in START_METHODS:
        raise ValueError(f"cutecall.warmup: start must be one of {START_METHODS}, "
                         f"got {start!r}")


def choose(start: str, modules: Sequence[str]) -> tuple[str, str]:
    """(method, reason) for ``warmup(start=...)``: "fork" or "forkserver".
    Before forking, `modules` are imported here (the workers inherit them);
    as an import may start JAX, "auto" looks again after."""
    check_start(start)
    if start == "forkserver":
        return start, "asked for"
    blocker = fork_blocker() if start == "auto" else None
    if blocker:
        return "forkserver", blocker
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as e:  # as the fork server does; the task reports it
            logger.info("warm-up: preload %s failed: %s", name, e)
    blocker = fork_blocker() if start == "auto" else None
    if blocker:
        return "forkserver", f"{blocker}, after importing the tasks' modules"
    return "fork", "asked for" if start == "fork" else "no JAX backend in this process"


def context(method: str, modules: Sequence[str]):
    """The multiprocessing context for `method`: "fork", or a fork server
    that preloads `modules` (a running server keeps its first list)."""
    if method == "forkserver":
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(modules))
        return ctx
    return multiprocessing.get_context("fork")


@contextlib.contextmanager
def quiet_fork():
    """Python warns that forking a process with threads may deadlock. Warm-up
    forks only while JAX runs no backend here (:func:`fork_blocker`); the
    threads left are idle pools (BLAS) with their own fork handlers, and
    CUDA's, which no worker calls."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks",
                                category=DeprecationWarning)
        yield


# Imported once (here or by the fork server), before any worker forks.
PRELOAD = ("jax", "cutlass", "cutlass.cute", "cutecall", "cutecall.jax")


def init_worker(environ: dict, arch: str) -> None:
    """A worker compiles, never runs. It takes the caller's environment as
    it is now (the fork server's is a copy from when it started), targets the
    caller's arch (CUTECALL_ARCH, so keys match), and JAX in it starts no GPU
    client (a CUDA context and a memory pool per worker would cost seconds
    and most of the GPU's memory). It shows no progress of its own: the
    caller draws the bar, and workers share its terminal."""
    os.environ.clear()
    os.environ.update(environ)
    os.environ.setdefault("CUTECALL_ARCH", arch)
    os.environ[progress.ENV] = "0"
    os.environ["JAX_PLATFORMS"] = "cpu"
    if "jax" in sys.modules:  # preloaded: its config read the server's env
        sys.modules["jax"].config.update("jax_platforms", "cpu")


def defining_modules(functions) -> list:
    """The modules that define `functions` (partials unwrapped), in order,
    without duplicates; ``__main__`` is left out (each worker imports the
    main script itself)."""
    modules = []
    for f in functions:
        while isinstance(f, functools.partial):
            f = f.func
        module = getattr(f, "__module__", None)
        if module and module != "__main__" and module not in modules:
            modules.append(module)
    return modules


def run_task(task) -> tuple:
    """In a worker: run `task`; return (seconds, compiles, disk hits, error,
    remote hits, the kernels it got)."""
    from .._driver.store import memory
    before, mark = memory.compile_stats(), memory.journal_mark()
    start = time.perf_counter()
    try:
        task()
        error = None
    except BaseException as e:  # noqa: BLE001 (reported, the others go on)
        error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    after = memory.compile_stats()
    return (time.perf_counter() - start, after["compiles"] - before["compiles"],
            after["disk_hits"] - before["disk_hits"], error,
            after["remote_hits"] - before["remote_hits"], tuple(memory.journal_since(mark)))


def run_pool(tasks, indices, workers: int, done, setup, tick) -> list:
    """Runs tasks[i] for i in `indices` in a pool of `workers` processes,
    calling ``done(i, run_task's tuple)`` as each finishes; returns the
    indices left unfinished when a worker died. Calls `tick()`
    at least once a second while waiting (the bar's clock)."""
    ctx, initargs = setup
    finished = set()
    with cf.ProcessPoolExecutor(workers, mp_context=ctx, initializer=init_worker,
                                initargs=initargs) as pool:
        with quiet_fork():    # a fork pool forks on the first submit
            futures = {pool.submit(run_task, tasks[i]): i for i in indices}
        pending = set(futures)
        while pending:
            ready, pending = cf.wait(pending, timeout=1.0,
                                     return_when=cf.FIRST_COMPLETED)
            for fut in ready:
                i = futures[fut]
                try:
                    result = fut.result()
                except cf.process.BrokenProcessPool:
                    continue
                finished.add(i)
                done(i, result)
            tick()
    return [i for i in indices if i not in finished]
