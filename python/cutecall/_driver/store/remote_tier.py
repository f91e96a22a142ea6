"""The remote tier behind the local one: kernels shared by every process of
a cluster (``CUTECALL_CACHE_REMOTE``), each compiled once.

The local tier asks this one on a miss (``local.get_or_build`` calls
:meth:`RemoteTier.get_or_build` as its build step), so a remote hit is
written to the local directory and every later process on the host loads
it from there. What is fetched is checked before use: the signature
(``signing``, with a key set), then the entry's two digests and its stamp
(``entry.decode``). What fails is refused by name, on the ``cutecall`` log
at WARNING, and rebuilt.

A backend that is down, slow (past its timeout) or missing its client
library never fails the job: the process warns once, naming the URL,
compiles locally, and leaves the remote tier alone for a minute.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from typing import Callable

from ..log import logger
from . import lease, signing
from .entry import CorruptEntry, decode, encode
from .remote import Backend, owner_id

__all__ = ["RemoteTier", "RemoteDown"]

RETRY_S = 60.0  # how long a backend that failed is left alone


class RemoteDown(Exception):
    """The backend failed (down, slow, refused the connection)."""


class _Guarded:
    """A backend whose every failure is RemoteDown, so a compile error is
    never mistaken for the backend's; ``answered`` counts the calls that
    succeeded."""

    def __init__(self, backend: Backend):
        self._backend = backend
        self.answered = 0

    def __getattr__(self, method):
        fn = getattr(self._backend, method)

        def call(*args):
            try:
                result = fn(*args)
            except Exception as e:  # noqa: BLE001 (any client error: the tier is down)
                raise RemoteDown(f"{type(e).__name__}: {e}") from e
            self.answered += 1
            return result
        return call


class RemoteTier:
    """The remote tier over `backend`. `signing_key`: sign what is
    published, refuse what is not signed with it. `read_only`: fetch, never
    publish nor lease (hosts that consume what CI or a warm-up published).
    `ttl_s`: a lease's time to live; `bound_s`: the longest wait for another
    process's compile."""

    def __init__(self, backend: Backend, *, signing_key: bytes | None = None,
                 read_only: bool = False, ttl_s: float = 30.0, bound_s: float = 900.0):
        self.backend, self.url = backend, backend.url
        self.signing_key, self.read_only = signing_key, read_only
        self.ttl_s, self.bound_s = ttl_s, bound_s
        self._owner = (0, "")
        self._guarded = _Guarded(backend)
        self._down_until = 0.0
        self._warned = False
        self._refused: set[str] = set()
        self.counters = {"hits": 0, "published": 0, "built": 0, "bytes_in": 0,
                         "bytes_out": 0, "waits": 0, "wait_s": 0.0, "takeovers": 0,
                         "refused": 0}

    def __repr__(self):
        mode = "read" if self.read_only else "read-write"
        return f"RemoteTier({self.url!r}, {mode}, signed={self.signing_key is not None})"

    @property
    def owner(self) -> str:
        """This process as a lease holder (a forked worker gets its own)."""
        if self._owner[0] != os.getpid():
            self._owner = (os.getpid(), owner_id())
        return self._owner[1]

    @property
    def answered(self) -> int:
        """How many backend calls have succeeded in this process."""
        return self._guarded.answered

    @staticmethod
    def name_for(key: str, stamp: dict) -> str:
        """The remote name of an entry: its key and a digest of its stamp,
        so environments sharing one store keep separate entries."""
        digest = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode())
        return f"{key}.{digest.hexdigest()[:16]}"

    def get_or_build(self, key: str, stamp: dict, build: Callable[[], tuple],
                     label: str) -> tuple[dict, bytes, str]:
        """(meta, data, how): the verified remote entry (how "remote"), or
        ``build()``'s ``(meta, data)``, how "compiled" when published (or
        read-only: never published), "unpublished" when the tier failed
        (``backlog`` publishes it later). Only `build`'s own errors
        propagate."""
        unpublished = "compiled" if self.read_only else "unpublished"
        if time.monotonic() < self._down_until:
            return (*build(), unpublished)
        name, built = self.name_for(key, stamp), {}

        def fetch():
            return self._fetch(name, key, stamp, label)

        def build_and_publish():
            built["v"] = build()
            built["published"] = self._publish(name, key, stamp, *built["v"], label)
            return built["v"]

        try:
            if self.read_only:
                got = fetch()
                return (*got, "remote") if got else (*build(), "compiled")
            result, how = lease.single_flight(
                self._guarded, name, fetch, build_and_publish, owner=self.owner,
                ttl_s=self.ttl_s, bound_s=self.bound_s, label=label,
                counters=self.counters, key=self.signing_key)
            if how == "compiled" and not built.get("published"):
                how = unpublished
            return (*result, how)
        except RemoteDown as e:
            self._went_down(e)
            return (*(built.get("v") or build()), unpublished)

    def _fetch(self, name, key, stamp, label) -> tuple | None:
        value = self._guarded.get(name)
        if value is None:
            return None
        try:
            entry = decode(signing.unwrap(name, value, self.signing_key), key)
        except (signing.Refused, CorruptEntry) as e:
            self.counters["refused"] += 1
            if name not in self._refused:
                self._refused.add(name)
                logger.warning("remote entry for %s (key %s) in %s refused: %s; "
                               "it is rebuilt", label, key[:16], self.url, e)
            return None
        if entry.stamp != stamp:
            return None
        self.counters["hits"] += 1
        self.counters["bytes_in"] += len(value)
        logger.info("remote hit: %s (key %s, %d bytes) from %s", label, key[:16],
                    len(value), self.url)
        return entry.meta, entry.data

    def _publish(self, name, key, stamp, meta, data, label) -> bool:
        self.counters["built"] += 1
        value = signing.wrap(name, encode(key, stamp, meta, bytes(data)), self.signing_key)
        try:
            self._guarded.put(name, value)
        except RemoteDown as e:
            self._went_down(e)
            return False
        self.counters["published"] += 1
        self.counters["bytes_out"] += len(value)
        logger.info("remote publish: %s (key %s, %d bytes) to %s", label, key[:16],
                    len(value), self.url)
        return True

    def publish(self, key: str, stamp: dict, meta: dict, data: bytes, label: str) -> bool:
        """Publishes an entry made earlier (``backlog``, shared records);
        False when read-only, resting after a failure, or failing now."""
        if self.read_only or time.monotonic() < self._down_until:
            return False
        return self._publish(self.name_for(key, stamp), key, stamp, meta, data, label)

    def _went_down(self, error: Exception) -> None:
        self._down_until = time.monotonic() + RETRY_S
        if not self._warned:
            self._warned = True
            warnings.warn(f"cutecall: remote cache {self.url} failed ({error}); kernels "
                          f"compile locally (tried again after {RETRY_S:.0f} s)",
                          RuntimeWarning, stacklevel=2)
        else:
            logger.info("remote cache %s failed again: %s", self.url, error)

    def fetch_into(self, key: str, stamp: dict, label: str) -> tuple | None:
        """(meta, data) of a published entry, verified, or None: no compile,
        no lease (warm-up's load step)."""
        if time.monotonic() < self._down_until:
            return None
        try:
            return self._fetch(self.name_for(key, stamp), key, stamp, label)
        except RemoteDown as e:
            self._went_down(e)
            return None
