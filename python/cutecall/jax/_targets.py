"""cutecall's XLA FFI targets and state type, registered with JAX once, on
first use, never at import. ``disable_automatic()`` leaves it to explicit
calls (``cutecall.register``), as NVIDIA's
``disable_automatic_ffi_registration`` does."""

from __future__ import annotations

import threading

import jax

from .. import _core
from .._driver import runtime as _runtime

TARGET = _core.TARGET
TARGET_NO_GRAPH = _core.TARGET_NO_GRAPH
STATE_TYPE = _core.STATE_TYPE
NAMES = (TARGET, TARGET_NO_GRAPH, STATE_TYPE)  # what registration registers

_lock = threading.Lock()
_registered = False
_automatic = True  # whether first use (not only an explicit call) registers


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
        _runtime.ensure_runtime_path()
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


def graph_target(ffi_call_target: str) -> bool:
    """``cutlass_call(ffi_call_target=...)``: whether the named target (one
    of cutecall's own) allows CUDA graphs."""
    ours = {TARGET: True, TARGET_NO_GRAPH: False}
    if ffi_call_target not in ours:
        raise ValueError(
            f"cutecall: ffi_call_target={ffi_call_target!r}: cutecall calls kernels "
            f"through its own targets ({TARGET}, {TARGET_NO_GRAPH}), whose ABI differs "
            "from NVIDIA's CuTeDSL call ABI; leave ffi_call_target unset")
    return ours[ffi_call_target]
