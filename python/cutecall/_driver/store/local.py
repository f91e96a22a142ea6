"""The local tier: compiled kernels on this machine's disk, shared by every
process of one user, so a new process loads a kernel instead of compiling it.

Layout (``docs/cache.md``)::

    $CUTECALL_CACHE_DIR/          default ~/.cache/cutecall, mode 0700
      v1/                         store format 1
        entries/<key>.ck          one file per specialization key, 0600
        locks/<key>.lock          one lock file per key (fcntl.flock)
        evict.lock                held by the process that evicts

An entry is one file: ``magic(8) | manifest length (u32 LE) | sha256 of the
manifest (32) | manifest (JSON) | object bytes``. The manifest holds the key,
the stamp (format, versions of cutecall / the DSL / CUDA, target arch), the
object's size and sha256, and ``meta`` (for kernels: every field of a
``CompiledKernel`` but the bytes). Both digests are checked on every read: a
corrupt, truncated or empty entry is never loaded; it is removed (under its
key's lock) and rebuilt, with a WARNING on the ``cutecall`` log. A stamp
that differs from the current one is a miss.

Writes go to a temp file in ``entries/``, are fsync'ed and renamed over the
entry (``os.replace``): readers see the old entry or the new one, never half
of one, so reads take no lock. Builds take the key's lock exclusively and look
again once they hold it, so concurrent processes build a key once. Total size
is bounded (``CUTECALL_CACHE_MAX_BYTES``, default 2 GiB); a hit touches the
entry's mtime and eviction drops the least recently used entries.

The environment that selects it: ``config``.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from typing import Callable

from ..log import logger
from .entry import DEFAULT_MAX_BYTES, FORMAT, CorruptEntry, Entry, decode, encode
from .local_files import StoreUnavailable, check_private_dir, file_lock

__all__ = ["ArtifactStore"]

_KEY = re.compile(r"[0-9a-f]{8,128}")
_TMP_MAX_AGE = 3600.0  # seconds before an orphaned temp file is removed

class ArtifactStore:
    """A content-addressed store of compiled objects under `root`.

    Args:
      root: the cache directory (created 0700; refused if others can write it).
      max_bytes: bound on the total size of entries; least recently used
        entries are evicted after a write that exceeds it.
    """

    def __init__(self, root: str, max_bytes: int = DEFAULT_MAX_BYTES):
        self.root = os.path.abspath(os.path.expanduser(root))
        self.max_bytes = int(max_bytes)
        self.base = os.path.join(self.root, f"v{FORMAT}")
        self.entries_dir = os.path.join(self.base, "entries")
        self.locks_dir = os.path.join(self.base, "locks")
        self._ready = False

    def __repr__(self):
        return f"ArtifactStore({self.root!r}, max_bytes={self.max_bytes})"

    def ensure(self) -> None:
        """Creates and checks the directories (once per store object, again
        if they were removed meanwhile)."""
        if self._ready and os.path.isdir(self.locks_dir) \
                and os.path.isdir(self.entries_dir):
            return
        try:
            os.makedirs(os.path.dirname(self.root), exist_ok=True)
        except OSError as e:
            raise StoreUnavailable(f"cutecall: cannot create cache directory "
                                   f"{os.path.dirname(self.root)}: {e.strerror}") from e
        for d in (self.root, self.base, self.entries_dir, self.locks_dir):
            check_private_dir(d)
        self._ready = True

    def path(self, key: str) -> str:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"cutecall: cache key must be lowercase hex, "
                             f"got {key!r}")
        return os.path.join(self.entries_dir, key + ".ck")

    def _lock_path(self, key: str) -> str:
        return os.path.join(self.locks_dir, key + ".lock")

    # -- read -----------------------------------------------------------------
    def read(self, key: str) -> Entry:
        """The verified entry for `key`; FileNotFoundError if there is none,
        CorruptEntry if it fails verification. Takes no lock."""
        path = self.path(key)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            return decode(f.read(), key)

    def load(self, key: str, stamp: dict) -> Entry | None:
        """The entry for `key` if present, valid and stamped `stamp` (then
        its mtime is touched, for LRU); else None. Removes nothing."""
        return self._lookup(key, stamp)[0]

    def _lookup(self, key: str, stamp: dict) -> tuple[Entry | None, str | None]:
        """(:meth:`load`'s entry, why the file failed verification or None)."""
        self.ensure()
        try:
            entry = self.read(key)
        except FileNotFoundError:
            return None, None
        except CorruptEntry as e:
            return None, str(e)
        if entry.stamp != stamp:
            return None, None
        with contextlib.suppress(OSError):
            os.utime(self.path(key))
        return entry, None

    # -- build ----------------------------------------------------------------
    def get_or_build(self, key: str, stamp: dict,
                     build: Callable[[], tuple[dict, bytes]],
                     rebuilt: str = "it is rebuilt",
                     durable: Callable[[], bool] | None = None) -> tuple[Entry, bool]:
        """(entry, built): the stored entry, or `build()`'s ``(meta, data)``
        stored under the key's lock (so each key builds once across
        processes). ``durable()`` False (asked after the build): the entry
        is a copy of one kept elsewhere (the remote tier), written without
        fsync; a copy torn by a crash fails its digest and is fetched again. Stale entries are replaced; a corrupt one is too, with a
        WARNING naming its path, the key, what failed and `rebuilt`
        (e.g. "kernel 'add' is recompiled")."""
        entry = self.load(key, stamp)
        if entry is not None:
            return entry, False
        with file_lock(self._lock_path(key)):
            # another process may have built (or repaired) it meanwhile
            entry, corrupt = self._lookup(key, stamp)
            if entry is not None:
                return entry, False
            if corrupt:
                logger.warning("corrupt store entry %s (key %s): %s; removed, and %s",
                               self.path(key), key[:16], corrupt, rebuilt)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(key))  # corrupt or stale: never loaded
            meta, data = build()
            entry = self._write(key, stamp, meta, bytes(data),
                                durable is None or durable())
        self.evict(protect=key)
        return entry, True

    def _write(self, key, stamp, meta, data, durable: bool = True) -> Entry:
        blob = encode(key, stamp, meta, data)
        entry = decode(blob, key)
        path = self.path(key)
        tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                         0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                    f.flush()
                    if durable:
                        os.fsync(f.fileno())
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            if durable:
                dfd = os.open(self.entries_dir, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        except OSError as e:  # the kernel is good; only persistence failed
            warnings.warn(f"cutecall: could not write cache entry {path}: {e}",
                          RuntimeWarning, stacklevel=3)
        return entry

    # -- maintenance ----------------------------------------------------------
    def scan(self) -> list[tuple[str, os.stat_result]]:
        """(key, stat) of every entry file; removes temp files orphaned for
        over an hour."""
        self.ensure()
        out, now = [], time.time()
        for d in os.scandir(self.entries_dir):
            try:
                st = d.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if d.name.endswith(".ck"):
                out.append((d.name[:-3], st))
            elif d.name.endswith(".tmp") and now - st.st_mtime > _TMP_MAX_AGE:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(d.path)
        return out

    def remove(self, key: str, blocking: bool = False) -> bool:
        """Removes `key`'s entry and lock file under its lock; False if the
        lock is busy (a process is building it) and `blocking` is False."""
        with file_lock(self._lock_path(key), blocking) as held:
            if not held:
                return False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(key))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock_path(key))
            return True

    def evict(self, protect: str | None = None) -> int:
        """Drops least recently used entries until the total size fits
        `max_bytes`; returns how many. One process evicts at a time."""
        with file_lock(os.path.join(self.base, "evict.lock"), False) as held:
            if not held:
                return 0
            found = sorted(self.scan(), key=lambda e: e[1].st_mtime)
            total, removed = sum(st.st_size for _, st in found), 0
            for key, st in found:
                if total <= self.max_bytes:
                    break
                if key != protect and self.remove(key):
                    total -= st.st_size
                    removed += 1
                    logger.info("store eviction: entry %s (%d bytes) from %s",
                                key[:16], st.st_size, self.root)
            return removed

    def verify(self, stamp_for: Callable[[Entry], dict] | None = None,
               repair: bool = True) -> list[tuple[str, str, int]]:
        """(key, status, size) per entry: 'ok', 'stale' (stamp differs from
        ``stamp_for(entry)``) or 'corrupt: <why>'. With `repair`, corrupt
        entries are removed (re-checked under their lock first)."""
        report = []
        for key, st in self.scan():
            try:
                entry = self.read(key)
                status = "ok"
                if stamp_for is not None and entry.stamp != stamp_for(entry):
                    status = "stale"
            except FileNotFoundError:
                continue
            except CorruptEntry as e:
                status = f"corrupt: {e}"
                if repair:
                    with file_lock(self._lock_path(key)):
                        try:
                            self.read(key)
                        except FileNotFoundError:
                            pass
                        except CorruptEntry:
                            os.unlink(self.path(key))
            report.append((key, status, st.st_size))
        return report

    def clear(self) -> tuple[int, int]:
        """Removes every entry; (removed, skipped because being built)."""
        removed = skipped = 0
        for key, _ in self.scan():
            if self.remove(key):
                removed += 1
            else:
                skipped += 1
        return removed, skipped

    def stats(self) -> dict:
        found = self.scan()
        return {"root": self.root, "entries": len(found),
                "bytes": sum(st.st_size for _, st in found),
                "max_bytes": self.max_bytes}
