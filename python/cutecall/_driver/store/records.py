"""Small records in the local tier, beside the kernels: an entry of JSON
``meta`` and no object bytes, under ``sha256(kind:key)``, stamped with the
versions that wrote it: the specializations the DSL rejected (so the static
fallback of a later process skips the failed compile), autotuning winners
(``store_record`` / ``load_record``), and recipes. Shared records
(``share_record`` / ``shared_record``: recipes) travel through the remote
tier too, signed and verified as kernel entries are; the others stay on the
host."""

from __future__ import annotations

import contextlib
import hashlib

from .config import default_store, remote_tier
from .stamps import record_stamp, rejection_stamp

__all__ = ["load_record", "record_rejection", "rejection", "shared_record",
           "share_record", "store_record"]


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


def share_record(key: str, arch: str, kind: str, meta: dict) -> None:
    """:func:`store_record`, and published to the remote tier when one is
    set (replacing what it held: the newest writer wins; best effort, a
    tier that is down warns once)."""
    store_record(key, arch, kind, meta)
    remote = remote_tier()
    if remote is not None:
        remote.publish(_record_key(kind, key), record_stamp(arch, kind), meta, b"",
                       f"{kind} record {key[:16]}")


def shared_record(key: str, arch: str, kind: str) -> dict | None:
    """The record under `key` from this host's store, else from the remote
    tier (verified, then kept locally); None when neither has it."""
    meta = load_record(key, arch, kind)
    if meta is not None:
        return meta
    remote = remote_tier()
    if remote is None:
        return None
    got = remote.fetch_into(_record_key(kind, key), record_stamp(arch, kind),
                            f"{kind} record {key[:16]}")
    if got is None:
        return None
    store_record(key, arch, kind, got[0])
    return dict(got[0])


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
