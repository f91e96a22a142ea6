"""One store entry as bytes, the same in every tier (a local file, a Redis
value, an object in a bucket): magic, manifest length, manifest digest,
manifest JSON, object bytes. Both digests are checked on every read, so an
entry from anywhere is verified before use."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import time

FORMAT = 1
MAGIC = b"CUTECAL\x01"
_HEADER = struct.Struct("<8sI32s")
DEFAULT_MAX_BYTES = 2 << 30


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
