"""Compiled kernels in the process's artifact store: the stamp an entry
carries (versions of cutecall, the DSL and CUDA, the target arch, the fields
of ``CompiledKernel``), :func:`load_or_compile`, and the records of
specializations the DSL rejected (so the static fallback of a later process
skips the failed compile)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import warnings
from typing import Callable

from ..._version import __version__
from .. import dsl, flavour
from ..compiled import CompiledKernel
from ..log import logger
from .config import default_store, remote_tier
from .entry import FORMAT, Entry

def cuda_versions() -> dict:
    """Versions of the CUDA pieces a compiled object depends on: the
    cuda-bindings the DSL drives and the DSL's CUDA library wheels."""
    names = ("cuda-bindings", "nvidia-cutlass-dsl-libs-cu13",
             "nvidia-cutlass-dsl-libs-cu12")
    return {n: v for n in names if (v := dsl.package_version(n))}


def current_stamp(arch: str) -> dict:
    """The stamp an entry compiled now for `arch` carries."""
    return dict(_versions_stamp(), arch=arch)


@functools.lru_cache(maxsize=1)
def _versions_stamp() -> dict:  # package metadata look-ups cost ~1 ms each
    return {"format": FORMAT, "cutecall": __version__,
            "dsl": dsl.dsl_version(), "flavour": flavour.name_or_none(),
            "cuda": cuda_versions()}


def _tuples(value):
    """JSON lists back to the tuples a frozen, hashable kernel holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _kernel_fields() -> tuple[str, ...]:
    """CompiledKernel fields kept in an entry's meta (the bytes are the
    object; key, name and sha256 come from the entry and the caller)."""
    return tuple(f.name for f in dataclasses.fields(CompiledKernel)
                 if f.name not in ("module", "key", "name", "sha256", "entry"))


def kernel_stamp(arch: str) -> dict:
    """The stamp of a kernel entry: `current_stamp` plus CompiledKernel's
    field names, so a change of the kernel record invalidates entries."""
    return dict(current_stamp(arch), kernel_fields=",".join(_kernel_fields()))


def stamp_of(entry: Entry) -> dict:
    """The stamp an entry of its kind would carry if written now (kernels,
    or records that the DSL rejected a key)."""
    if entry.meta.get("rejected"):
        return rejection_stamp(entry.stamp.get("arch", ""))
    if entry.meta.get("autotune"):
        return record_stamp(entry.stamp.get("arch", ""), "autotune")
    return kernel_stamp(entry.stamp.get("arch", ""))


def record_stamp(arch: str, kind: str) -> dict:
    """The stamp of a small record (not a kernel) of kind `kind`."""
    return dict(current_stamp(arch), kind=kind)


def _record_key(prefix: str, key: str) -> str:
    return hashlib.sha256(f"{prefix}:{key}".encode()).hexdigest()


def _write_record(record_key: str, stamp: dict, meta: dict, replace: bool) -> None:
    """A small JSON entry (no object bytes) in the default store, for every
    process of this user. Best effort: a store failure is silent."""
    store = default_store()
    if store is None:
        return
    with contextlib.suppress(OSError):
        if replace:
            store.remove(record_key)
        store.get_or_build(record_key, stamp, lambda: (meta, b""))


def _read_record(record_key: str, stamp: dict) -> dict | None:
    """The meta of a record written with `stamp` (same versions), or None."""
    store = default_store()
    if store is None:
        return None
    try:
        entry = store.load(record_key, stamp)
    except OSError:
        return None
    return None if entry is None else dict(entry.meta)


def store_record(key: str, arch: str, kind: str, meta: dict) -> None:
    """Writes a record (e.g. an autotuning winner) under sha256(kind:key);
    a new one replaces the old."""
    _write_record(_record_key(kind, key), record_stamp(arch, kind), meta, replace=True)


def load_record(key: str, arch: str, kind: str) -> dict | None:
    """The record `store_record` wrote with the same versions, or None."""
    return _read_record(_record_key(kind, key), record_stamp(arch, kind))


def rejection_stamp(arch: str) -> dict:
    return record_stamp(arch, "rejection")


def record_rejection(key: str, name: str, arch: str, cause: str,
                     source_line: str = "") -> None:
    """Remembers, for every process of this user, that the DSL rejected
    specialization `key` and where (the static fallback then starts above
    it, guided by `source_line`). Best effort: a store failure is silent
    (the next process compiles again)."""
    _write_record(_record_key("rejected", key), rejection_stamp(arch),
                  {"rejected": key, "name": name, "cause": cause[:2000],
                   "source_line": source_line[:2000]}, replace=False)


def rejection(key: str, arch: str) -> tuple[str, str] | None:
    """(why, the failing source line) if a process recorded that the DSL
    rejected `key` (with the same cutecall, DSL and CUDA versions); else
    None."""
    meta = _read_record(_record_key("rejected", key), rejection_stamp(arch))
    if meta is None:
        return None
    return str(meta.get("cause", "?")), str(meta.get("source_line", ""))


def load_or_compile(key: str, name: str, arch: str, compile: Callable):
    """(CompiledKernel, how) through the default store, how being "local"
    (a verified entry on this machine), "remote" (fetched from the remote
    tier, verified, and now local too) or "compiled" (``compile()``'s
    kernel, stored in both tiers). No store: compiles. The stamp names
    CompiledKernel's fields, so changing them invalidates. An unsafe
    directory raises CacheError; a store that cannot be created
    (StoreUnavailable, an OSError) or an I/O failure of the store
    (read-only, full, EIO) warns and the kernel is used without it; a remote
    tier that fails warns once (``remote_tier``)."""
    store = default_store()
    if store is None:
        return compile(), "compiled"
    fields, done, stamp = _kernel_fields(), {}, kernel_stamp(arch)
    remote = remote_tier()

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
        meta, data, done["how"] = remote.get_or_build(key, stamp, compile_meta,
                                                      f"kernel '{name}'")
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
    if not built:
        logger.info("store hit: kernel '%s' (key %s) from %s", name, key[:16], store.root)
    compiled = done.get("kernel")
    if built and compiled is not None and compiled.sha256 == entry.sha256:
        return compiled, done.get("how", "local")  # its plan parsed once, kept
    return CompiledKernel(name=name, key=key, module=entry.data, sha256=entry.sha256,
                          **{f: _tuples(entry.meta[f]) for f in fields}), \
        done.get("how", "local") if built else "local"


class _NotPublished(Exception):
    pass


def prefetch(key: str, name: str, arch: str) -> bool:
    """Copies kernel `key` from the remote tier to the local one (verified),
    compiling nothing; True when the local tier now has it. Warm-up's load
    step, for the kernels other processes compiled."""
    store, remote = default_store(), remote_tier()
    if store is None:
        return False
    stamp = kernel_stamp(arch)

    def fetch():
        got = None if remote is None else remote.fetch_into(key, stamp, f"kernel '{name}'")
        if got is None:
            raise _NotPublished(key)
        return got

    try:
        store.get_or_build(key, stamp, fetch, rebuilt=f"kernel '{name}' is fetched again",
                           durable=lambda: False)
    except (_NotPublished, OSError):
        return False
    return True
