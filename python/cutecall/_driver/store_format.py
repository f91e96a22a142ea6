"""The artifact store's files: the entry format (one file: magic, manifest
length, manifest digest, manifest JSON, object bytes; both digests checked on
every read), private directories (0700, refused if others can write them)
and per-key file locks. ``store`` builds the store on these."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import stat
import struct
import time

FORMAT = 1
MAGIC = b"CUTECAL\x01"
_HEADER = struct.Struct("<8sI32s")
DEFAULT_MAX_BYTES = 2 << 30


class CacheError(RuntimeError):
    """The artifact store cannot be used (message names the path and why)."""


class StoreUnavailable(CacheError, OSError):
    """The store's directory cannot be created (a read-only file system, no
    permission). An OSError too: the driver warns and uses the kernel it
    compiled without the store (docs/cache.md), where an unsafe directory
    (another owner, group-writable) stays a hard CacheError."""


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
        raise StoreUnavailable(f"cutecall: cannot create cache directory {path}: "
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
