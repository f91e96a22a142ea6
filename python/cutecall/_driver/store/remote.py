"""The remote tier's interface: what a backend (Redis, a shared filesystem,
an object store) must do, and which backend a URL names.

A backend stores opaque values under names and holds leases. Everything
else (signing, digests, stamps, single flight, warnings) lives above it, in
``remote_tier`` and ``lease``, so another backend is one file of these seven
methods. A backend raises whatever its client raises when the service is
down or slow; the tier turns that into one warning and local compiles.

=================  ============================================================
scheme             backend
=================  ============================================================
``redis://``       ``redis_backend`` (redis-py: ``pip install 'cutecall[redis]'``);
``rediss://``      also ``unix://`` sockets
``file://``        ``file_backend``: a directory on NFS, Lustre or a FUSE bucket
anything else      ``fsspec_backend`` (``gs://``, ``s3://``, ...:
                   ``pip install 'cutecall[fsspec]'`` and the filesystem's package)
=================  ============================================================
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Protocol
from urllib.parse import urlsplit

__all__ = ["Backend", "check_url", "open_backend", "owner_id"]


class Backend(Protocol):
    """Names are ``[0-9a-f.]`` strings chosen by the tier; values are bytes.
    A lease's value is a token string chosen by the tier (``lease``): who
    holds it, until when, signed; a renewal writes the holder's next one."""

    url: str

    def get(self, name: str) -> bytes | None:
        """The value published under `name`, or None."""

    def put(self, name: str, value: bytes) -> None:
        """Publishes `value` under `name` atomically: a reader sees the old
        value or the whole new one, never part of one."""

    def acquire(self, name: str, owner: str, ttl_s: float) -> str | None:
        """Takes the lease `name` for `ttl_s` seconds, its value `owner`:
        None when taken (it was free, or its time ran out), else the
        current value."""

    def renew(self, name: str, owner: str, renewed: str, ttl_s: float) -> bool:
        """Replaces the lease's value `owner` with `renewed` for another
        `ttl_s` seconds; False if its value is no longer `owner`."""

    def release(self, name: str, owner: str) -> None:
        """Drops the lease if its value is still `owner` (a holder's own, or
        one a waiter found dead or refused)."""

    def stats(self) -> dict:
        """{'entries': n, 'bytes': total} of published values."""

    def ping(self) -> None:
        """Returns when the service answers; raises otherwise."""


def owner_id() -> str:
    """This process, as a lease holder: host, pid and a random tag."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


REDIS_SCHEMES = ("redis", "rediss", "unix")


def file_url_path(url: str, parts, name: str) -> str:
    """The path of a ``file://`` URL (`parts`: its ``urlsplit``); a host
    in it is a ValueError naming `name` (the setting or argument)."""
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"cutecall: {name}={url!r}: a file:// URL "
                         f"takes an absolute path (file:///shared/cache)")
    return parts.path


_FORMS = "redis://host:6379/0, unix:///run/redis.sock, file:///shared/path, gs://bucket/path"


@functools.lru_cache(maxsize=16)
def check_url(url: str, name: str = "CUTECALL_CACHE_REMOTE") -> str:
    """`url` when a backend can use it, else a ValueError naming `name`
    (the setting or argument), the value and the form expected: a
    ``redis://`` URL needs a host (a numeric database, if any), ``unix://``
    and ``file://`` an absolute path, and any other scheme must be a
    protocol fsspec knows (checked when fsspec is installed; without it,
    the first use warns what to install)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()

    def bad(why: str) -> ValueError:
        return ValueError(f"cutecall: {name}={url!r} {why}")

    if not scheme or not url[len(parts.scheme):].startswith("://"):
        raise bad(f"is not a URL ({_FORMS})")
    if scheme in ("redis", "rediss"):
        try:
            parts.port
        except ValueError as e:
            raise bad(f"has a bad port ({e})") from None
        if not parts.hostname:
            raise bad(f"names no host ({scheme}://host:6379/0)")
        if not parts.path.strip("/").isdigit() and parts.path.strip("/"):
            raise bad(f"names database {parts.path.strip('/')!r}, not a number "
                      f"({scheme}://host:6379/0)")
    elif scheme == "file":
        if not file_url_path(url, parts, name).startswith("/"):
            raise bad("names no absolute path (file:///absolute/path)")
    elif scheme == "unix":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise bad("names no absolute path (unix:///absolute/path.sock)")
    else:
        try:
            import fsspec
        except ImportError:
            return url
        if scheme not in fsspec.available_protocols():
            raise bad(f"has an unknown scheme {scheme!r}: use redis, rediss, unix, file "
                      f"or a protocol fsspec knows (gs, s3, az, ...)")
    return url


def open_backend(url: str, timeout_s: float) -> Backend:
    """The backend for `url` (module docstring's table). Raises ValueError
    for a URL it cannot use (``check_url``) and ImportError naming the
    extra to install."""
    parts = urlsplit(check_url(url))
    scheme = parts.scheme.lower()
    if scheme in REDIS_SCHEMES:
        try:
            from .redis_backend import RedisBackend
        except ImportError as e:
            raise ImportError(f"CUTECALL_CACHE_REMOTE={url} needs redis-py: "
                              f"pip install 'cutecall[redis]' ({e})") from e
        return RedisBackend(url, timeout_s)
    if scheme == "file":
        from .file_backend import FileBackend
        return FileBackend(url, file_url_path(url, parts, "CUTECALL_CACHE_REMOTE"))
    try:
        from .fsspec_backend import FsspecBackend
    except ImportError as e:
        raise ImportError(f"CUTECALL_CACHE_REMOTE={url} needs fsspec: "
                          f"pip install 'cutecall[fsspec]' ({e})") from e
    return FsspecBackend(url)
