"""Whether ejkernel's CuTe API can run here: the DSL imports, its runtime
library is found, cutecall's FFI targets register. Checked lazily: importing
cutecall never imports the DSL."""

from __future__ import annotations

import functools

from .._driver import runtime as _runtime

@functools.cache
def _dsl_import_error() -> str | None:
    """None when the CuTe DSL imports, else why not."""
    try:
        import cutlass  # noqa: F401
        import cutlass.cute  # noqa: F401
    except Exception as e:  # a broken install raises more than ImportError
        return f"{type(e).__name__}: {e}"
    return None


def _support_error() -> str | None:
    if (err := _dsl_import_error()) is not None:
        return f"the CuTe DSL does not import ({err})"
    if _runtime.find_runtime_library() is None:
        return ("the CuTe DSL runtime library libcute_dsl_runtime.so was not "
                "found (install nvidia-cutlass-dsl-libs-cu13 or -cu12, or set "
                "$CUTECALL_DSL_RUNTIME)")
    try:
        _runtime.ensure_registered()
    except Exception as e:
        return f"cutecall's FFI targets could not be registered with JAX ({e})"
    return None


def has_cute_ffi_support() -> bool:
    """Whether :func:`build_cute_ffi_call` kernels can be compiled and lowered.

    True when all of these hold: the CuTe DSL (``cutlass``, ``cutlass.cute``)
    imports; the DSL runtime library ``libcute_dsl_runtime.so``, which runs
    the compiled kernels, is found; cutecall's FFI targets are registered
    with JAX. It needs no GPU, no ``jax_tvm_ffi`` and no ``tvm_ffi``: on a
    machine without a GPU, kernels compile (for ``$CUTECALL_ARCH``, default
    sm_90a) and lower for the ``cuda`` platform (``jax.export``, AOT); only
    running them needs a GPU, and a call that would run on another platform
    raises ``NotImplementedError`` saying so.
    """
    return _support_error() is None


def _require_dsl(what: str) -> None:
    if (err := _dsl_import_error()) is not None:
        raise ValueError(f"`{what}` is only available when the CuTe DSL "
                         f"(nvidia-cutlass-dsl) is installed: {err}")
