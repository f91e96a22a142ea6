"""The process's compiled kernels: the in-process cache in front of the
artifact store, the lock that serializes ``cute.compile`` (not
thread-safe), and the counters tests and users read (``compile_stats``).

Owner of: the bounded LRU of :class:`CompiledKernel`\\ s by specialization
key, the keys whose dynamic form the DSL rejected (so the static fallback
skips them), and the kernel names already warned about. Every entry point
takes :data:`lock`; the ``*_locked`` ones expect the caller to hold it.
"""

from __future__ import annotations

import collections
import hashlib
import os
import sys
import threading

from . import lookup
from ..compile_error import CompileError
from ..compiled import CompiledKernel, KernelSpec

CAPACITY = 1024

lock = threading.RLock()


class _Counters:
    compiles = 0      # DSL compiles run, failed ones included
    hits = 0          # in-memory cache hits
    disk_hits = 0     # kernels loaded from the local tier
    remote_hits = 0   # kernels fetched from the remote tier
    got = 0           # kernels got from a store or a compile (the journal's total)
    fallbacks = 0     # specializations compiled static after the dynamic form failed


_entries: collections.OrderedDict[str, CompiledKernel] = collections.OrderedDict()
_counters = _Counters()
# Dynamic-form keys the DSL rejected (their kernels compile static), and the
# kernel names already warned about; both bounded like the cache.
_rejected: collections.OrderedDict[str, tuple] = collections.OrderedDict()
# Calls no form compiled for, by their first form's key: (the world they
# failed in, the error), raised again without compiling when the same call
# comes back to the same world (``surroundings``).
_failed: collections.OrderedDict[str, tuple] = collections.OrderedDict()
warned: set[str] = set()
# (key, name, arch, how) of each kernel this process got from a store or a
# compile, newest last: warm-up reports who compiled what from it.
_journal: collections.deque = collections.deque(maxlen=CAPACITY)


def compile_stats() -> dict:
    """{'compiles': DSL compiles run (failed ones included), 'hits':
    in-memory cache hits, 'disk_hits': kernels loaded from the local store,
    'remote_hits': kernels fetched from the remote tier
    (``CUTECALL_CACHE_REMOTE``), 'static_fallbacks': specializations
    compiled with static layouts because the DSL rejected the dynamic ones,
    'entries': cache size}."""
    with lock:
        return {"compiles": _counters.compiles, "hits": _counters.hits,
                "disk_hits": _counters.disk_hits, "remote_hits": _counters.remote_hits,
                "static_fallbacks": _counters.fallbacks, "entries": len(_entries)}


def clear_cache() -> None:
    """Drops every in-process compiled kernel (counters are kept)."""
    with lock:
        _entries.clear()
        _failed.clear()


def journal_mark() -> int:
    """A mark for :func:`journal_since`."""
    with lock:
        return _counters.got


def journal_since(mark: int) -> list[tuple]:
    """(key, name, arch, how) of every kernel got from a store or compiled
    since `mark`, oldest first; how: "compiled", "local" or "remote"."""
    with lock:
        n = min(_counters.got - mark, len(_journal))
        return list(_journal)[len(_journal) - n:] if n > 0 else []


def cached(key: str) -> bool:
    with lock:
        return key in _entries


def get_or_compile(spec: KernelSpec, name: str, options: str,
                   arch: str) -> CompiledKernel:
    """The compiled kernel for `spec`: from the in-process cache, else the
    artifact store, else compiled (``compiler.compile_kernel``) and stored."""
    with lock:
        return get_locked(spec, name, options, arch)


def get_locked(spec: KernelSpec, name: str, options: str, arch: str) -> CompiledKernel:
    kernel = _entries.get(spec.key)
    if kernel is not None:
        _entries.move_to_end(spec.key)
        _counters.hits += 1
        return kernel
    from ..compiler import compile_kernel
    try:
        kernel, how = lookup.load_or_compile(
            spec.key, name, arch, lambda: compile_kernel(spec, name, options, arch))
    except CompileError:
        _counters.compiles += 1
        raise
    if how == "compiled":
        _counters.compiles += 1
    elif how == "remote":
        _counters.remote_hits += 1
    else:
        _counters.disk_hits += 1
    _journal.append((spec.key, name, arch, how))
    _counters.got += 1
    _entries[spec.key] = kernel
    while len(_entries) > CAPACITY:
        _entries.popitem(last=False)
    return kernel


def load(key: str, name: str, arch: str) -> CompiledKernel | None:
    """Kernel `key` from the process, else a store (verified as every
    entry), else None: nothing is compiled. A recipe's hit path."""
    with lock:
        kernel = _entries.get(key)
        if kernel is not None:
            _entries.move_to_end(key)
            _counters.hits += 1
            return kernel

        found = lookup.find_kernel(key, name, arch)
        if found is None:
            return None
        kernel, how = found
        if how == "remote":
            _counters.remote_hits += 1
        else:
            _counters.disk_hits += 1
        _journal.append((key, name, arch, how))
        _counters.got += 1
        _entries[key] = kernel
        while len(_entries) > CAPACITY:
            _entries.popitem(last=False)
        return kernel


def is_rejected(key: str) -> bool:
    return key in _rejected


def rejected_source(key: str) -> str:
    """The failing source line of a key the DSL rejected in this process."""
    return _rejected.get(key, ("", "", ""))[1]


def rejected_cause(key: str) -> str:
    """Why the DSL rejected a key in this process (its root cause), or ""."""
    return _rejected.get(key, ("", "", ""))[2]


def remember_rejection(key: str, name: str, source_line: str = "", cause: str = "") -> None:
    _rejected[key] = (name, source_line or rejected_source(key), cause or rejected_cause(key))
    _rejected.move_to_end(key)
    while len(_rejected) > CAPACITY:
        _rejected.popitem(last=False)


def surroundings() -> str:
    """A digest of what a compile depends on that no key covers: the
    environment variables, ``sys.path`` and the modules loaded. A failure
    is remembered only while they stay the same, so a retry after the cause
    is fixed (a variable set, a package installed or imported) compiles
    again."""
    env = "\0".join(f"{k}={v}" for k, v in sorted(os.environ.items()))
    world = f"{env}\1{chr(0).join(sys.path)}\1{len(sys.modules)}"
    return hashlib.sha256(world.encode(errors="replace")).hexdigest()


def remember_failure(key: str, error: CompileError) -> None:
    _failed[key] = (surroundings(), error)
    _failed.move_to_end(key)
    while len(_failed) > CAPACITY:
        _failed.popitem(last=False)


def failure(key: str) -> CompileError | None:
    """The error of a call (by its first form's key) that nothing compiled
    for earlier in the process, in the same :func:`surroundings`, or None."""
    found = _failed.get(key)
    if found is None:
        return None
    world, error = found
    if world != surroundings():
        del _failed[key]
        return None
    return error


def forget_rejection(key: str) -> None:
    _rejected.pop(key, None)


def count_fallback() -> None:
    _counters.fallbacks += 1
