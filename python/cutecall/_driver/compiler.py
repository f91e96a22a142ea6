"""The compile driver: a specialization in, object bytes and a plan out.

Owns the in-process compile cache (bounded LRU, keyed by the content
specialization key of ``_spec.specialization_key``) and the lock that
serializes ``cute.compile``, which is not thread-safe. Compiles are counted
(``compile_stats``) so tests can assert how often the DSL ran.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import threading
import time
import warnings
from typing import Any, Callable

from . import dsl, kernel_cache, spec as _spec
from .log import describe, logger
from .compiled import CompiledKernel, FlatTree, KernelSpec  # noqa: F401 (API)
from .compile_error import (CompileError, StaticFallbackWarning, compile_error,
                            user_stacklevel)

_CACHE_CAPACITY = 1024


class _Cache:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.entries: collections.OrderedDict[str, CompiledKernel] = \
            collections.OrderedDict()
        self.compiles = 0
        self.hits = 0

    def get(self, key):
        kernel = self.entries.get(key)
        if kernel is not None:
            self.entries.move_to_end(key)
            self.hits += 1
        return kernel

    def put(self, key, kernel):
        self.entries[key] = kernel
        self.entries.move_to_end(key)
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)


_lock = threading.Lock()
_cache = _Cache(_CACHE_CAPACITY)
_disk_hits = 0  # kernels loaded from the artifact store
_fallbacks = 0  # specializations compiled static after the dynamic form failed
# Dynamic-form keys the DSL rejected (their kernels compile static), and the
# kernel names already warned about; both bounded like the cache.
_rejected: collections.OrderedDict[str, str] = collections.OrderedDict()
_warned: set[str] = set()
FALLBACK_ENV = "CUTECALL_STATIC_FALLBACK"


def compile_stats() -> dict:
    """{'compiles': DSL compiles run (failed ones included), 'hits':
    in-memory cache hits, 'disk_hits': kernels loaded from the artifact
    store, 'static_fallbacks': specializations compiled with static layouts
    because the DSL rejected the dynamic ones, 'entries': cache size}."""
    with _lock:
        return {"compiles": _cache.compiles, "hits": _cache.hits,
                "disk_hits": _disk_hits, "static_fallbacks": _fallbacks,
                "entries": len(_cache.entries)}


def check_fallback_option(option) -> bool | None:
    """Validates a front's ``static_fallback=`` argument."""
    if option is not None and not isinstance(option, bool):
        raise TypeError(f"cutecall: static_fallback must be a bool or None, "
                        f"got {option!r}")
    return option


def fallback_enabled(option: bool | None) -> bool:
    """`option` if given, else ``$CUTECALL_STATIC_FALLBACK`` (default on;
    ``0``/``false``/``off`` turn the fallback into an error)."""
    if option is not None:
        return bool(option)
    value = os.environ.get(FALLBACK_ENV, "1").strip().lower()
    return value not in ("0", "false", "off", "no")


def clear_cache() -> None:
    """Drops every in-process compiled kernel (counters are kept)."""
    with _lock:
        _cache.entries.clear()


def _arch_from_capability(cc: str) -> str:
    major, minor = (int(x) for x in str(cc).split(".")[:2])
    suffix = "a" if major >= 9 else ""
    return f"sm_{major}{minor}{suffix}"


def default_arch() -> str:
    """$CUTECALL_ARCH, else the first CUDA device JAX sees, else sm_90a."""
    env = os.environ.get("CUTECALL_ARCH")
    if env:
        return env
    try:
        import jax
        devices = jax.devices("cuda")
    except RuntimeError:
        devices = []
    if devices and getattr(devices[0], "compute_capability", None):
        return _arch_from_capability(devices[0].compute_capability)
    return "sm_90a"


def resolve_options(compile_options: str | None,
                    arch: str | None = None) -> tuple[str, str]:
    """(options passed to cute.compile, target arch). An arch named in the
    options wins, then `arch` (the front end's device), then default_arch()."""
    options = (compile_options or "").strip()
    m = re.search(r"--gpu-arch[= ](\S+)", options)
    if m:
        return options, m.group(1)
    arch = arch or default_arch()
    return (options + f" --gpu-arch {arch}").strip(), arch


def versions() -> dict:
    from .._version import __version__
    return {"cutecall": __version__, "dsl": dsl.dsl_version()}


def get_or_compile(spec: KernelSpec, name: str, options: str,
                   arch: str) -> CompiledKernel:
    """Returns the compiled kernel for `spec`: from the in-process cache, else
    the on-disk artifact store (``_store``), else compiled (and stored)."""
    with _lock:
        return _get_locked(spec, name, options, arch)


def _get_locked(spec, name, options, arch) -> CompiledKernel:
    global _disk_hits
    kernel = _cache.get(spec.key)
    if kernel is not None:
        return kernel
    try:
        kernel, compiled = kernel_cache.load_or_compile(
            spec.key, name, arch,
            lambda: _compile_locked(spec, name, options, arch))
    except CompileError:
        _cache.compiles += 1
        raise
    if compiled:
        _cache.compiles += 1
    else:
        _disk_hits += 1
    _cache.put(spec.key, kernel)
    return kernel


def _remember_rejection(key: str, name: str) -> None:
    _rejected[key] = name
    _rejected.move_to_end(key)
    while len(_rejected) > _CACHE_CAPACITY:
        _rejected.popitem(last=False)


def compile_ladder(build: Callable[[Any], KernelSpec | None], rungs: list,
                   start: int, name: str, options: str, arch: str,
                   fallback: bool | None, explicit: Callable[[Any], str]
                   ) -> tuple[CompiledKernel, KernelSpec, int]:
    """Compiles the first form of a call the DSL accepts: ``build(None)``
    (dynamic layouts), then ``build(rung)`` for each rung of the static
    fallback ladder (``_fallback.ladder``), from level `start` (what worked
    last time for this kernel; 0 = dynamic). Returns the kernel, its spec
    and its level.

    Climbing warns once per kernel with :class:`StaticFallbackWarning`,
    naming the rung and ``explicit(rung)`` (how to ask for it); with
    ``fallback=False`` (or ``$CUTECALL_STATIC_FALLBACK=0``) the dynamic
    form's ``CompileError`` is raised instead. Keys the DSL rejected are
    remembered for the process and recorded in the artifact store: each
    fails to compile once per user and version, not per call or process.
    """
    global _fallbacks
    allowed = fallback_enabled(fallback)
    first_error, seen, cause = None, set(), "rejected earlier in the process"
    start = start if allowed else 0
    for level in range(start, len(rungs) + 1 if allowed else 1):
        rung = rungs[level - 1] if level else None
        spec = build(rung)
        if spec is None or spec.key in seen:
            continue
        seen.add(spec.key)
        with _lock:
            cached = spec.key in _cache.entries
            stored = None if cached or spec.key in _rejected or \
                level == len(rungs) or not allowed \
                else kernel_cache.rejection_cause(spec.key, arch)
            if stored is not None:
                cause = f"{stored} (recorded by an earlier process)"
            if spec.key in _rejected or stored is not None:
                _remember_rejection(spec.key, name)
                continue
            try:
                kernel = _get_locked(spec, name, options, arch)
            except CompileError as e:
                logger.info("kernel '%s' rejected a form for %s: %s", name, arch,
                            e.root_cause)
                first_error = first_error or e
                _remember_rejection(spec.key, name)
                if level < len(rungs) and allowed:
                    kernel_cache.record_rejection(spec.key, name, arch, e.root_cause)
                continue
            if level and not cached:
                _fallbacks += 1
                logger.info("kernel '%s': static fallback, compiled with %s (%s)",
                            name, rung.summary,
                            first_error.root_cause if first_error else cause)
            warn = level > 0 and name not in _warned
            if warn:
                _warned.add(name)
        if warn:
            cause = first_error.root_cause if first_error else cause
            warnings.warn(
                f"cutecall: kernel '{name}' does not compile with dynamic "
                f"layouts ({cause}); compiled with {rung.summary}, as its "
                f"authors' launch path or NVIDIA's cutlass_call would. To ask "
                f"for this explicitly: {explicit(rung)}. To make it an error: "
                f"static_fallback=False or {FALLBACK_ENV}=0.",
                StaticFallbackWarning, stacklevel=user_stacklevel())
        return kernel, spec, level
    if first_error is None:  # every form was rejected earlier in the process
        spec = build(None)
        with _lock:
            _rejected.pop(spec.key, None)
            kernel = _get_locked(spec, name, options, arch)  # raises again
        return kernel, spec, 0
    if allowed and len(rungs):
        raise CompileError(
            f"{first_error}\n(no static form compiled either; the fully "
            f"static one is tried last)", kernel=name, arch=arch,
            root_cause=first_error.root_cause,
            dsl_message=first_error.dsl_message) from first_error
    raise first_error


def _compile_locked(spec, name, options, arch) -> CompiledKernel:
    try:
        import cuda.bindings.driver as cuda
        import cutlass.cute as cute

        from . import wrapper as _wrapper
    except ImportError as e:
        raise CompileError(
            f"cutecall: compiling kernel '{name}' needs the CuTe DSL "
            f"(pip install 'nvidia-cutlass-dsl[cu13]'): {e}", kernel=name,
            arch=arch, root_cause=f"the CuTe DSL is not importable: {e}") from e
    prefix = "cc_" + spec.key[:16]
    start = time.perf_counter()
    try:
        with dsl.dsl_compile_settings(arch):
            compiled = cute.compile(_wrapper.cutecall_entry, cuda.CUstream(0),
                                    *_wrapper.example_slots(spec), spec=spec,
                                    options=options)
            module = bytes(compiled.dump_to_object(prefix))
    except Exception as e:  # the DSL raises many types; keep the cause
        raise compile_error(e, name, arch, spec.binding) from e
    seconds = time.perf_counter() - start
    logger.info("compiled kernel '%s' for %s in %.2f s: %s (key %s)", name, arch,
                seconds, describe(spec), spec.key[:16])
    plan = _spec.encode_plan(spec.operands, spec.num_args, spec.num_rets,
                             len(spec.scalar_types))
    names = ",".join(op.name for op in spec.operands)
    symbols = ",".join(spec.symbols)
    from .. import _core
    num_slots = _core.KernelEntry(
        module=module, sha256="", function=prefix, kernel=name,
        plan=plan.tolist(), operand_names=names, symbol_names=symbols).num_slots
    _core.check_object(module, prefix)
    return CompiledKernel(
        name=name, key=spec.key, module=module,
        sha256=hashlib.sha256(module).hexdigest(), function=prefix,
        plan=tuple(int(x) for x in plan), operand_names=names,
        symbol_names=symbols, num_slots=num_slots, arch=arch, compile_seconds=seconds)
