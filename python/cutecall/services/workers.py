"""How warm-up workers start: forked from this process when that is safe,
else forked from a fork server.

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

import contextlib
import importlib
import multiprocessing
import os
import sys
import warnings
from typing import Sequence

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
