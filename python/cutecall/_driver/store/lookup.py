"""Kernels through the tiers: :func:`load_or_compile` (the local tier, then
the remote one, else a compile stored in both), :func:`load_kernel` (the
same reads, never a compile; :func:`find_kernel` also says which tier) and
:func:`prefetch` (a remote entry copied to the local tier). Every entry read is verified (``entry``, ``signing``) and
stamped with the running versions (``stamps``)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Callable

from ..compiled import CompiledKernel
from ..log import logger
from . import backlog
from .config import default_store, remote_tier
from .entry import Entry
from .stamps import kernel_fields, kernel_stamp

__all__ = ["find_kernel", "load_kernel", "load_or_compile", "prefetch"]


def _tuples(value):
    """JSON lists back to the tuples a frozen, hashable kernel holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _kernel(entry: Entry, key: str, name: str) -> CompiledKernel:
    """The CompiledKernel a verified kernel entry holds."""
    return CompiledKernel(name=name, key=key, module=entry.data, sha256=entry.sha256,
                          **{f: _tuples(entry.meta[f]) for f in kernel_fields()})


def load_or_compile(key: str, name: str, arch: str, compile: Callable):
    """(CompiledKernel, how) through the default store, how being "local"
    (a verified entry on this machine), "remote" (fetched from the remote
    tier, verified, and now local too) or "compiled" (``compile()``'s
    kernel, stored in both tiers). No store: compiles. The stamp names
    CompiledKernel's fields, so changing them invalidates. An unsafe
    directory raises CacheError; a store that cannot be created
    (StoreUnavailable, an OSError) or an I/O failure of the store
    (read-only, full, EIO) warns and the kernel is used without it; a remote
    tier that fails warns once (``remote_tier``), and what compiles
    meanwhile is published when it answers again (``backlog``)."""
    store = default_store()
    if store is None:
        return compile(), "compiled"
    fields, done, stamp = kernel_fields(), {}, kernel_stamp(arch)
    remote = remote_tier()
    answered = 0 if remote is None else remote.answered

    def compile_meta():
        done["started"] = True
        kernel = done["kernel"] = compile()
        return ({"name": kernel.name, **{f: getattr(kernel, f) for f in fields}},
                kernel.module)

    def build():
        logger.info("store miss: kernel '%s' (key %s) in %s", name, key[:16], store.root)
        if remote is None:
            done["how"] = "compiled"
            return compile_meta()
        meta, data, how = remote.get_or_build(key, stamp, compile_meta, f"kernel '{name}'")
        done["how"] = "compiled" if how == "unpublished" else how
        done["unpublished"] = how == "unpublished"
        return meta, data

    try:
        entry, built = store.get_or_build(key, stamp, build,
                                          rebuilt=f"kernel '{name}' is recompiled",
                                          durable=lambda: done["how"] != "remote")
    except OSError as e:
        if "started" in done and "kernel" not in done:
            raise  # the compile itself failed
        warnings.warn(f"cutecall: artifact store {store.root} failed ({e}); "
                      f"kernel '{name}' is used without it", RuntimeWarning,
                      stacklevel=3)
        return done.get("kernel") or compile(), "compiled"
    _settle(store, remote, key, answered, done.get("unpublished", False))
    if not built:
        logger.info("store hit: kernel '%s' (key %s) from %s", name, key[:16], store.root)
    compiled = done.get("kernel")
    if built and compiled is not None and compiled.sha256 == entry.sha256:
        return compiled, done.get("how", "local")  # its plan parsed once, kept
    return _kernel(entry, key, name), done.get("how", "local") if built else "local"


def _settle(store, remote, key: str, answered: int, unpublished: bool) -> None:
    """Remembers kernel `key` when the remote tier did not take it; after a
    contact with the tier that succeeded, publishes the kernels remembered
    earlier (``backlog``). Best effort."""
    if remote is None:
        return
    with contextlib.suppress(OSError):
        if unpublished:
            backlog.remember(store, key)
        elif remote.answered > answered:
            backlog.publish(store, remote)


class _NotPublished(Exception):
    pass


def _fetched(key: str, name: str, arch: str) -> tuple[Entry, str] | None:
    """(entry, how) of kernel `key`: from the local tier (how "local"),
    else copied there from the remote tier (how "remote"; verified, no
    fsync: the remote copy is the durable one); None when neither has it,
    or the store is off or fails."""
    store, remote = default_store(), remote_tier()
    if store is None:
        return None
    stamp, answered = kernel_stamp(arch), 0 if remote is None else remote.answered

    def fetch():
        got = None if remote is None else remote.fetch_into(key, stamp, f"kernel '{name}'")
        if got is None:
            raise _NotPublished(key)
        return got

    try:
        entry, fetched = store.get_or_build(key, stamp, fetch, durable=lambda: False,
                                            rebuilt=f"kernel '{name}' is fetched again")
    except (_NotPublished, OSError):
        return None
    _settle(store, remote, key, answered, False)
    return entry, "remote" if fetched else "local"


def find_kernel(key: str, name: str, arch: str) -> tuple[CompiledKernel, str] | None:
    """(kernel, how) as :func:`load_kernel` finds it, how being "local" or
    "remote"; None when no tier has it."""
    found = _fetched(key, name, arch)
    return None if found is None else (_kernel(found[0], key, name), found[1])


def load_kernel(key: str, name: str, arch: str) -> CompiledKernel | None:
    """The kernel stored under specialization key `key` for `arch`: from
    the local tier, else from the remote tier (then kept locally too);
    None when no tier has it. Compiles nothing, takes no remote lease;
    every entry is verified (digests, stamp, signature with a signing key).
    When another process of this host is storing the same key, waits for
    it (the local tier's per-key lock). `name` labels the log records.

    Example::

        kernel = load_kernel(spec.key, "vector_add", "sm_90a")
        if kernel is None:
            ...  # a miss in every tier: compile (load_or_compile)
    """
    found = find_kernel(key, name, arch)
    return None if found is None else found[0]


def prefetch(key: str, name: str, arch: str) -> bool:
    """Copies kernel `key` from the remote tier to the local one (verified),
    compiling nothing; True when the local tier now has it. Warm-up's load
    step, for the kernels other processes compiled."""
    return _fetched(key, name, arch) is not None
