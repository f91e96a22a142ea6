"""Entries in the remote tier are code another host will run: with
``CUTECALL_CACHE_SIGNING_KEY`` set, each is HMAC-SHA256-signed when
published and checked when fetched. An unsigned or wrongly signed entry is
refused by name (``Refused``) and rebuilt.

A remote value is ``magic(8) | mac(32) | entry`` where ``entry`` is the
bytes of ``entry.encode`` (its own digests are checked too) and ``mac`` is
``HMAC-SHA256(key, name | entry)`` or 32 zero bytes when unsigned. The name
is inside the MAC, so a signed entry moved to another key is refused.

A lease (``lease``) is signed the same way: its token ends with
``HMAC-SHA256(key, "lease|" name "|" token)`` in hex, so only a holder of
the key can make other hosts wait.
"""

from __future__ import annotations

import hashlib
import hmac

MAGIC = b"CCREMOT1"
_UNSIGNED = bytes(32)
ENV = "CUTECALL_CACHE_SIGNING_KEY"

__all__ = ["Refused", "wrap", "unwrap", "lease_mac", "lease_mac_ok", "ENV"]


class Refused(Exception):
    """A remote value that must not be used; the message says why."""


def _mac(key: bytes, name: str, blob: bytes) -> bytes:
    return hmac.new(key, name.encode() + b"|" + blob, hashlib.sha256).digest()


def wrap(name: str, blob: bytes, key: bytes | None) -> bytes:
    """The value to publish under `name`: signed when `key` is given."""
    return MAGIC + (_mac(key, name, blob) if key else _UNSIGNED) + blob


def unwrap(name: str, value: bytes, key: bytes | None) -> bytes:
    """The entry bytes inside a remote value. With a signing key, an unsigned
    or wrongly signed value raises Refused; without one, any value passes
    (its digests are still checked by ``entry.decode``)."""
    if len(value) < len(MAGIC) + 32 or not value.startswith(MAGIC):
        raise Refused("not a cutecall remote entry (bad magic)")
    mac, blob = value[len(MAGIC):len(MAGIC) + 32], value[len(MAGIC) + 32:]
    if key is None:
        return blob
    if mac == _UNSIGNED:
        raise Refused(f"unsigned, and {ENV} is set")
    if not hmac.compare_digest(mac, _mac(key, name, blob)):
        raise Refused(f"wrongly signed (its HMAC does not match {ENV})")
    return blob


def lease_mac(key: bytes, name: str, body: str) -> str:
    """The signature (hex) of lease token `body` on remote name `name`."""
    return hmac.new(key, f"lease|{name}|{body}".encode(), hashlib.sha256).hexdigest()


def lease_mac_ok(key: bytes, name: str, body: str, mac: str) -> bool:
    """Whether `mac` signs lease token `body` on `name` with `key`."""
    return hmac.compare_digest(mac.encode(), lease_mac(key, name, body).encode())
