"""The C++ core's runtime settings: where the DSL runtime library is
(``libcute_dsl_runtime.so``, found without importing the DSL compiler) and
whether launches block. Front-neutral: the JAX front registers its XLA FFI
targets itself (``cutecall.jax._targets``)."""

from __future__ import annotations

import os
import threading

from .. import _core
from . import flavour as _flavour

_lock = threading.Lock()


def find_runtime_library() -> str | None:
    """Path of libcute_dsl_runtime.so: $CUTECALL_DSL_RUNTIME, else the
    runtime of the CUDA flavour the DSL compiles for (:mod:`.flavour`);
    None when none is installed. Found without importing the DSL compiler.
    Raises ``flavour.FlavourError`` when the flavour cannot run here."""
    env = os.environ.get("CUTECALL_DSL_RUNTIME")
    if env:
        return env
    if not _flavour.installed():
        return None
    return _flavour.selected().runtime


def ensure_runtime_path() -> None:
    """Tells the C++ core where the DSL runtime library is (once), before
    its first module load. Every front calls it before C++ loads a kernel."""
    if _core.runtime_path():
        return
    with _lock:
        path = find_runtime_library()  # FlavourError: driver too old, etc.
        if path and not _core.runtime_path():
            _core.set_runtime_path(path)


def set_launch_blocking(on: bool) -> None:
    """Makes every cutecall launch (JAX, torch, C++ bundles) wait for its
    kernel and raise on a CUDA error, naming the kernel and the CUDA status,
    instead of the error surfacing later at an unrelated sync with no kernel
    named. The same as ``CUTECALL_LAUNCH_BLOCKING=1``. Off by default: a
    sync per launch stops the host from running ahead of the GPU (launches
    no longer overlap Python, XLA or torch work), which costs throughput.
    Streams being captured into CUDA graphs are not synchronized.

    Example::

        cutecall.set_launch_blocking(True)   # while debugging a fault
    """
    if not isinstance(on, bool):
        raise TypeError(f"cutecall.set_launch_blocking: on must be a bool, got {on!r}")
    _core.set_launch_blocking(on)


def launch_blocking() -> bool:
    """Whether launches block (``set_launch_blocking``)."""
    return bool(_core.launch_blocking())
