"""CuTe DSL shims: versions, the DSL's process-wide settings while cutecall
compiles or a library builds its kernel objects (``dsl_arch``), a library's
``cute.compile`` arguments captured without compiling (``compile_args``),
and the default launch stream. Every use of the DSL's internals
that differs across its releases lives here and nowhere else (JAX's live in
``cutecall.jax._compat``). Imports no JAX and no torch."""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import importlib.metadata
from typing import Any, Callable, NamedTuple

def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def dsl_version() -> str | None:
    return package_version("nvidia-cutlass-dsl")


def clear_dsl_jit_cache() -> None:
    """Empties the CuTe DSL's in-memory JIT cache (implicit ``@cute.jit``
    calls) if the DSL is loaded; never imports it. nvidia-cutlass-dsl 4.8."""
    if "cutlass" not in sys.modules:
        return
    from cutlass.cutlass_dsl.cutlass import CuTeDSL

    cache = getattr(CuTeDSL._get_dsl(), "jit_cache", None)
    if cache is not None:
        cache.clear()


@contextlib.contextmanager
def dsl_compile_settings(arch: str):
    """The CuTe DSL settings of a cutecall compile, restored afterwards.

    * arch: the DSL builds the host JIT engine that ``dump_to_object`` needs
      only when the runtime arch can run the compiled one; on a machine
      without a GPU it detects a default arch and the export fails. The arch
      is made `arch` while compiling.
    * TVM-FFI off: cutecall compiles its own ABI. A process that set
      ``CUTE_DSL_ENABLE_TVM_FFI=1`` (ejkernel's kernel modules do) would make
      every compile target TVM-FFI and need apache-tvm-ffi.

    Process-wide DSL state: callers hold the compile lock.
    """
    from cutlass.cutlass_dsl.cutlass import CuTeDSL

    envar = CuTeDSL._get_dsl().envar
    previous_arch = envar._arch
    previous_tvm_ffi = getattr(envar, "enable_tvm_ffi", None)
    envar.arch = arch
    if previous_tvm_ffi is not None:
        envar.enable_tvm_ffi = False
    try:
        yield
    finally:
        envar._arch = previous_arch
        if previous_tvm_ffi is not None:
            envar.enable_tvm_ffi = previous_tvm_ffi


@contextlib.contextmanager
def loc_tracebacks(depth: int):
    """While a kernel is traced, every MLIR op records the Python frames
    that made it (the innermost `depth`) as its location: the DSL's own
    switch (``CUTE_DSL_LOC_TRACEBACKS``), set on its settings object and
    restored afterwards. Off when the DSL compiles with line info (the DSL
    says the two together can crash). Callers hold the compile lock.
    nvidia-cutlass-dsl 4.8."""
    from cutlass.cutlass_dsl.cutlass import CuTeDSL

    envar = CuTeDSL._get_dsl().envar
    previous = getattr(envar, "loc_tracebacks", None)
    if previous is None or getattr(envar, "lineinfo", False):
        yield False
        return
    envar.loc_tracebacks = max(int(previous or 0), depth)
    try:
        yield True
    finally:
        envar.loc_tracebacks = previous


@contextlib.contextmanager
def dsl_arch(arch: str):
    """The CuTe DSL's target arch set to `arch` while a library builds its
    kernel objects, restored afterwards.

    FA4's and QuACK's constructors read it (``BaseDSL._get_dsl()
    .get_arch_enum()``: ``$CUTE_DSL_ARCH``, else the detected GPU, else
    sm_100a) and their sm90 classes assert an sm_90a-family arch, so building
    them on a machine without a GPU needs it set::

        with dsl_arch("sm_90a"):
            kernel = FlashAttentionForwardSm90(...)

    Process-wide DSL state: not thread-safe. nvidia-cutlass-dsl 4.8."""
    from cutlass.cutlass_dsl import BaseDSL

    envar = BaseDSL._get_dsl().envar
    saved = getattr(envar, "_arch", None)
    envar.arch = arch
    try:
        yield
    finally:
        envar.arch = saved


class Captured(NamedTuple):
    """What a library's compile function hands to ``cute.compile``."""

    kernel: Any        # the callable compiled (a kernel object or @cute.jit)
    args: tuple        # its positional arguments, as the library built them
    kwargs: dict       # keyword arguments (``options=...``)


class _Stop(BaseException):
    def __init__(self, captured: Captured):
        self.captured = captured


_compile_args_lock = threading.Lock()


def compile_args(fn: Callable, *args, **kwargs) -> Captured:
    """Runs ``fn(*args, **kwargs)`` (a library's host code, e.g. QuACK's
    ``_compile_gemm``) until it calls ``cute.compile`` and returns that
    call's arguments: the kernel object and its arguments exactly as the
    library built them (fake tensors included). Nothing is compiled::

        captured = compile_args(quack.gemm._compile_gemm.__wrapped__, ...)
        captured.kernel, captured.args

    Raises ``RuntimeError`` if `fn` returns without compiling (a cached
    path: call the undecorated function, e.g. ``f.__wrapped__`` of QuACK's
    ``@jit_cache`` functions). Swaps ``cute.compile`` for the call, under a
    lock: process-wide DSL state."""
    import cutlass.cute as cute

    def intercept(kernel, *a, **kw):
        raise _Stop(Captured(kernel, a, kw))

    with _compile_args_lock:
        original = cute.compile
        cute.compile = intercept
        try:
            fn(*args, **kwargs)
        except _Stop as stop:
            return stop.captured
        finally:
            cute.compile = original
    raise RuntimeError(f"{getattr(fn, '__qualname__', fn)!r} returned without "
                       "calling cute.compile (a cached path?)")


_launch_stream = contextvars.ContextVar("cutecall_launch_stream", default=None)
_launch_patch_lock = threading.Lock()
_launch_patched = False


def _patch_launch_default_stream() -> None:
    """Makes ``kernel(...).launch(...)`` without a stream use the stream set
    by :func:`launches_on`, instead of CUDA's legacy default stream (which
    does not order with XLA's or torch's stream: a race). Outside
    ``launches_on`` the DSL behaves exactly as before. Hooks the DSL's
    ``_preprocess_launch_config_args`` (nvidia-cutlass-dsl 4.8)."""
    global _launch_patched
    with _launch_patch_lock:
        if _launch_patched:
            return
        from cutlass.cutlass_dsl.cutlass import CutlassBaseDSL

        original = getattr(CutlassBaseDSL, "_preprocess_launch_config_args", None)
        if original is None:
            raise RuntimeError(
                "cutecall: this CuTe DSL version has no "
                "CutlassBaseDSL._preprocess_launch_config_args; launchers must "
                "pass stream= to every kernel launch")

        def preprocess(self, args, kwargs):
            original(self, args, kwargs)
            stream = _launch_stream.get()
            if stream is not None and kwargs.get("async_deps") is None \
                    and len(args) < 7:  # async_deps is LaunchConfig's 7th field
                kwargs["async_deps"] = stream

        CutlassBaseDSL._preprocess_launch_config_args = preprocess
        _launch_patched = True


@contextlib.contextmanager
def launches_on(stream):
    """While tracing a cutecall entry point: kernel launches that name no
    stream go on `stream` (the caller's: XLA's or torch's)."""
    _patch_launch_default_stream()
    token = _launch_stream.set(stream)
    try:
        yield
    finally:
        _launch_stream.reset(token)
