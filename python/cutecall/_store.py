"""The artifact store: compiled kernels on disk, shared by every process of
one user, so a new process loads a kernel instead of compiling it.

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
key's lock) and rebuilt. A stamp that differs from the current one is a miss.

Writes go to a temp file in ``entries/``, are fsync'ed and renamed over the
entry (``os.replace``): readers see the old entry or the new one, never half
of one, so reads take no lock. Builds take the key's lock exclusively and look
again once they hold it, so concurrent processes build a key once. Total size
is bounded (``CUTECALL_CACHE_MAX_BYTES``, default 2 GiB); a hit touches the
entry's mtime and eviction drops the least recently used entries.

Environment: ``CUTECALL_CACHE_DIR``, ``CUTECALL_CACHE=0`` (off),
``CUTECALL_CACHE_MAX_BYTES`` (bytes, or with a K/M/G suffix).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import stat
import struct
import time
import warnings
from typing import Callable

FORMAT = 1
MAGIC = b"CUTECAL\x01"
_HEADER = struct.Struct("<8sI32s")
DEFAULT_MAX_BYTES = 2 << 30
_KEY = re.compile(r"[0-9a-f]{8,128}")
_TMP_MAX_AGE = 3600.0  # seconds before an orphaned temp file is removed


class CacheError(RuntimeError):
    """The artifact store cannot be used (message names the path and why)."""


class CorruptEntry(Exception):
    """An entry failed verification (internal; never loaded)."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """A verified entry: the object bytes and what was stored with them."""
    key: str
    stamp: dict
    meta: dict
    data: bytes
    sha256: str
    created: float


def encode(key: str, stamp: dict, meta: dict, data: bytes) -> bytes:
    """The bytes of one entry file (format above)."""
    manifest = json.dumps({
        "format": FORMAT, "key": key, "stamp": stamp, "meta": meta,
        "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
        "created": time.time()}, sort_keys=True).encode()
    digest = hashlib.sha256(manifest).digest()
    return _HEADER.pack(MAGIC, len(manifest), digest) + manifest + data


def decode(blob: bytes, key: str) -> Entry:
    """Verifies an entry file's bytes; raises CorruptEntry saying why."""
    if len(blob) < _HEADER.size:
        raise CorruptEntry(f"truncated header ({len(blob)} bytes)")
    magic, length, digest = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise CorruptEntry(f"bad magic {magic!r}")
    end = _HEADER.size + length
    if end > len(blob):
        raise CorruptEntry(f"truncated manifest ({len(blob)} < {end} bytes)")
    raw = blob[_HEADER.size:end]
    if hashlib.sha256(raw).digest() != digest:
        raise CorruptEntry("manifest digest mismatch")
    try:
        m = json.loads(raw)
        data = blob[end:]
        if m["key"] != key:
            raise CorruptEntry(f"entry holds key {m['key']}")
        if len(data) != m["size"]:
            raise CorruptEntry(f"object is {len(data)} of {m['size']} bytes")
        if hashlib.sha256(data).hexdigest() != m["sha256"]:
            raise CorruptEntry("object sha256 mismatch")
        return Entry(key, m["stamp"], m["meta"], data, m["sha256"],
                     m["created"])
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptEntry(f"bad manifest: {e!r}") from e


def check_private_dir(path: str) -> None:
    """Creates `path` (mode 0700) if missing; raises CacheError if it is not
    a directory, belongs to another user, or group/others can write it."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise CacheError(f"cutecall: cannot create cache directory {path}: "
                         f"{e.strerror}") from e
    st = os.stat(path)
    fix = ("cutecall stores machine code there; use a private directory "
           "(chmod 700, or set CUTECALL_CACHE_DIR) or set CUTECALL_CACHE=0")
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"cutecall: cache path {path} is not a directory")
    if st.st_uid != os.getuid():
        raise CacheError(f"cutecall: cache directory {path} is owned by uid "
                         f"{st.st_uid}, not by this user (uid {os.getuid()}); "
                         + fix)
    if st.st_mode & 0o022:
        raise CacheError(f"cutecall: cache directory {path} is writable by "
                         f"group or others (mode {oct(st.st_mode & 0o777)}); "
                         + fix)


@contextlib.contextmanager
def file_lock(path: str, blocking: bool = True):
    """Holds an exclusive flock on `path` (created 0600); yields False when
    `blocking` is False and another process holds it. Safe against the lock
    file being removed by its holder: the inode locked is the one at `path`."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            yield False
            return
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # removed or replaced while we waited: lock the new one
    try:
        yield True
    finally:
        os.close(fd)


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
        os.makedirs(os.path.dirname(self.root), exist_ok=True)
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
        self.ensure()
        try:
            entry = self.read(key)
        except (FileNotFoundError, CorruptEntry):
            return None
        if entry.stamp != stamp:
            return None
        with contextlib.suppress(OSError):
            os.utime(self.path(key))
        return entry

    # -- build ----------------------------------------------------------------
    def get_or_build(self, key: str, stamp: dict,
                     build: Callable[[], tuple[dict, bytes]]) -> tuple[Entry, bool]:
        """(entry, built): the stored entry, or `build()`'s ``(meta, data)``
        stored under the key's lock (so each key builds once across
        processes). Corrupt or stale entries are replaced."""
        entry = self.load(key, stamp)
        if entry is not None:
            return entry, False
        with file_lock(self._lock_path(key)):
            entry = self.load(key, stamp)  # another process may have built it
            if entry is not None:
                return entry, False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(key))  # corrupt or stale: never loaded
            meta, data = build()
            entry = self._write(key, stamp, meta, bytes(data))
        self.evict(protect=key)
        return entry, True

    def _write(self, key, stamp, meta, data) -> Entry:
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
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
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


# -- the process's store ------------------------------------------------------
_OFF = ("0", "false", "off", "no")
_ON = ("", "1", "true", "on", "yes")
_default: ArtifactStore | None = None


def parse_size(text: str, name: str = "CUTECALL_CACHE_MAX_BYTES") -> int:
    """'2147483648', '512M', '2G' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"cutecall: {name}={text!r} is not a size in bytes "
                         f"(e.g. 2147483648, 512M, 2G)")
    return int(m.group(1)) << (10 * " kmgt".index(m.group(2).lower() or " "))


def default_store() -> ArtifactStore | None:
    """The store the environment selects, or None when CUTECALL_CACHE=0."""
    global _default
    flag = os.environ.get("CUTECALL_CACHE", "1").strip().lower()
    if flag in _OFF:
        return None
    if flag not in _ON:
        raise ValueError(f"cutecall: CUTECALL_CACHE={flag!r}: use 1 or 0")
    root = os.environ.get("CUTECALL_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "cutecall")
    limit = os.environ.get("CUTECALL_CACHE_MAX_BYTES")
    max_bytes = parse_size(limit) if limit else DEFAULT_MAX_BYTES
    root = os.path.abspath(os.path.expanduser(root))
    if _default is None or (_default.root, _default.max_bytes) != (root, max_bytes):
        _default = ArtifactStore(root, max_bytes)
    return _default


def cuda_versions() -> dict:
    """Versions of the CUDA pieces a compiled object depends on: the
    cuda-bindings the DSL drives and the DSL's CUDA library wheels."""
    from . import _compat
    names = ("cuda-bindings", "nvidia-cutlass-dsl-libs-cu13",
             "nvidia-cutlass-dsl-libs-cu12")
    return {n: v for n in names if (v := _compat.package_version(n))}


def current_stamp(arch: str) -> dict:
    """The stamp an entry compiled now for `arch` carries."""
    return dict(_versions_stamp(), arch=arch)


@functools.lru_cache(maxsize=1)
def _versions_stamp() -> dict:  # package metadata look-ups cost ~1 ms each
    from . import __version__, _compat
    return {"format": FORMAT, "cutecall": __version__,
            "dsl": _compat.dsl_version(), "cuda": cuda_versions()}


def _tuples(value):
    """JSON lists back to the tuples a frozen, hashable kernel holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _kernel_fields() -> tuple[str, ...]:
    """CompiledKernel fields kept in an entry's meta (the bytes are the
    object; key, name and sha256 come from the entry and the caller)."""
    from ._compile import CompiledKernel
    return tuple(f.name for f in dataclasses.fields(CompiledKernel)
                 if f.name not in ("module", "key", "name", "sha256"))


def kernel_stamp(arch: str) -> dict:
    """The stamp of a kernel entry: `current_stamp` plus CompiledKernel's
    field names, so a change of the kernel record invalidates entries."""
    return dict(current_stamp(arch), kernel_fields=",".join(_kernel_fields()))


def stamp_of(entry: Entry) -> dict:
    """The stamp an entry of its kind would carry if written now (kernels,
    or records that the DSL rejected a key)."""
    if entry.meta.get("rejected"):
        return rejection_stamp(entry.stamp.get("arch", ""))
    return kernel_stamp(entry.stamp.get("arch", ""))


def rejection_stamp(arch: str) -> dict:
    return dict(current_stamp(arch), kind="rejection")


def _rejection_key(key: str) -> str:
    return hashlib.sha256(f"rejected:{key}".encode()).hexdigest()


def record_rejection(key: str, name: str, arch: str, cause: str) -> None:
    """Remembers, for every process of this user, that the DSL rejected
    specialization `key` (the static fallback then starts above it). Best
    effort: a store failure is silent (the next process compiles again)."""
    store = default_store()
    if store is None:
        return
    with contextlib.suppress(OSError):
        store.get_or_build(_rejection_key(key), rejection_stamp(arch),
                           lambda: ({"rejected": key, "name": name,
                                     "cause": cause[:2000]}, b""))


def rejection_cause(key: str, arch: str) -> str | None:
    """Why the DSL rejected `key`, if a process recorded it (with the same
    cutecall, DSL and CUDA versions); else None."""
    store = default_store()
    if store is None:
        return None
    try:
        entry = store.load(_rejection_key(key), rejection_stamp(arch))
    except OSError:
        return None
    return None if entry is None else str(entry.meta.get("cause", "?"))


def load_or_compile(key: str, name: str, arch: str, compile: Callable):
    """(CompiledKernel, compiled?) through the default store: a verified
    entry, else ``compile()``'s kernel, stored. No store: compiles. The
    stamp names CompiledKernel's fields, so changing them invalidates.
    An unsafe directory raises CacheError; an I/O failure of the store
    (read-only, full, EIO) warns and the kernel is used without it."""
    store = default_store()
    if store is None:
        return compile(), True
    fields, done = _kernel_fields(), {}

    def build():
        done["started"] = True
        kernel = done["kernel"] = compile()
        return ({"name": kernel.name, **{f: getattr(kernel, f) for f in fields}},
                kernel.module)

    try:
        entry, built = store.get_or_build(key, kernel_stamp(arch), build)
    except OSError as e:
        if "started" in done and "kernel" not in done:
            raise  # the compile itself failed
        warnings.warn(f"cutecall: artifact store {store.root} failed ({e}); "
                      f"kernel '{name}' is used without it", RuntimeWarning,
                      stacklevel=3)
        return done.get("kernel") or compile(), True
    from ._compile import CompiledKernel
    return CompiledKernel(name=name, key=key, module=entry.data, sha256=entry.sha256,
                          **{f: _tuples(entry.meta[f]) for f in fields}), built
