"""The C++ core: finding the DSL runtime library and registering the XLA
FFI targets. Registration happens once, on first use, never at import;
``disable_automatic()`` leaves it to explicit calls (``cutecall.register``)."""

from __future__ import annotations

import glob
import os
import sys
import threading

from .. import _core

TARGET = _core.TARGET
TARGET_NO_GRAPH = _core.TARGET_NO_GRAPH
STATE_TYPE = _core.STATE_TYPE
NAMES = (TARGET, TARGET_NO_GRAPH, STATE_TYPE)  # what registration registers

_lock = threading.Lock()
_registered = False
_automatic = True  # whether first use (not only an explicit call) registers


def find_runtime_library() -> str | None:
    """Path of libcute_dsl_runtime.so: $CUTECALL_DSL_RUNTIME, else the
    installed nvidia-cutlass-dsl-libs-cu13 (preferred) or -cu12 wheel.
    Found without importing the DSL compiler."""
    env = os.environ.get("CUTECALL_DSL_RUNTIME")
    if env:
        return env
    for base in sys.path:
        for flavour in ("cu13", "cu12"):
            hits = glob.glob(os.path.join(base, "nvidia_cutlass_dsl", flavour,
                                          "lib", "libcute_dsl_runtime.so"))
            if hits:
                return hits[0]
    return None


def ensure_registered(*, explicit: bool = False) -> None:
    """Registers cutecall's FFI targets and state type with JAX (CUDA).
    Front ends call it on first use; after :func:`disable_automatic` only an
    `explicit` call (the user's ``cutecall.register()``) registers."""
    global _registered
    if _registered or not (explicit or _automatic):
        return
    with _lock:
        if _registered:
            return
        import jax

        path = find_runtime_library()
        if path and not _core.runtime_path():
            _core.set_runtime_path(path)
        jax.ffi.register_ffi_type(_core.STATE_TYPE, _core.state_type(),
                                  platform="CUDA")
        for name, stages in _core.handlers().items():
            jax.ffi.register_ffi_target(name, stages, platform="CUDA",
                                        api_version=1)
        _registered = True


def is_registered() -> bool:
    """Whether this process registered cutecall's targets (all of NAMES)."""
    return _registered


def disable_automatic() -> None:
    """From now on only explicit calls register (process-wide, idempotent)."""
    global _automatic
    with _lock:
        _automatic = False


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
