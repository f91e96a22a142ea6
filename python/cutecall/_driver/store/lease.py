"""One compile per key across processes and hosts: a lease per key in the
remote tier.

A process that misses takes the key's lease (``Backend.acquire``), looks
once more (the entry may have been published between its miss and the
lease), compiles and publishes, and drops the lease. While it compiles, a
thread renews the lease every third of its time to live, so a long compile
keeps it and a dead process loses it when it expires. The others wait with
backoff (20 ms doubling to 0.5 s, jittered), looking for the entry, and
load it; when the lease lapses unpublished, the next waiter takes it over
and compiles. Past ``bound_s`` of waiting a process compiles on its own.

A lease's value is a token that says who holds it, until when and for how
long a renewal keeps it (:class:`Lease`), HMAC-signed with the signing key
when one is set. Each renewal writes a new token. Whoever can write the
remote tier can write a lease too, so a waiter trusts none blindly:

- with a signing key, a lease not signed with it is refused: a WARNING
  names it, the waiter deletes it (if it is still that value) and takes the
  lease itself;
- in any case a lease is dead once its stated expiry has passed, or once
  its token has not changed for its time to live (the holder stopped
  renewing: dead, or not a cutecall process). An unsigned lease's time to
  live counts no longer than the waiter's own. A dead lease is deleted and
  taken over.

Without a key, a writer that keeps rewriting a lease can still hold
waiters for ``bound_s``: set ``CUTECALL_CACHE_SIGNING_KEY``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import threading
import time
from typing import Callable

from ..log import logger
from . import signing

__all__ = ["Lease", "Watch", "read_token", "single_flight", "token"]

GRACE_S = 2.0        # clock skew allowed past a lease's stated expiry
FORGED_TRIES = 3     # refused leases cleared before compiling without one


@dataclasses.dataclass(frozen=True)
class Lease:
    """What a lease's token says: its holder (``host:pid:tag``), the epoch
    second it expires, its time to live, and whether it is signed with the
    waiter's key."""
    owner: str
    expires: float
    ttl_s: float
    signed: bool


def token(name: str, owner: str, ttl_s: float, key: bytes | None) -> str:
    """The value of `owner`'s lease on `name` for the next `ttl_s` seconds:
    ``owner|expires|ttl|mac`` (mac ``-`` without a key)."""
    body = f"{owner}|{time.time() + ttl_s:.3f}|{ttl_s:g}"
    return f"{body}|{signing.lease_mac(key, name, body) if key else '-'}"


def read_token(name: str, value: str, key: bytes | None) -> Lease | None:
    """The lease a token describes, or None if it is not one."""
    parts = value.rsplit("|", 3)
    if len(parts) != 4:
        return None
    owner, expires, ttl, mac = parts
    try:
        expires_s, ttl_s = float(expires), float(ttl)
    except ValueError:
        return None
    if not (math.isfinite(expires_s) and math.isfinite(ttl_s) and ttl_s > 0):
        return None
    signed = key is not None and mac != "-" and signing.lease_mac_ok(
        key, name, f"{owner}|{expires}|{ttl}", mac)
    return Lease(owner, expires_s, ttl_s, signed)


class Watch:
    """A waiter's view of the lease it waits on: which token, since when
    unchanged, and what to make of it."""

    def __init__(self, name: str, key: bytes | None, ttl_s: float, bound_s: float):
        self.name, self.key, self.ttl_s, self.bound_s = name, key, ttl_s, bound_s
        self.value, self.since, self.forged = None, 0.0, 0

    def holder(self, value: str) -> str:
        lease = read_token(self.name, value, self.key)
        return lease.owner if lease else repr(value[:80])

    def verdict(self, value: str) -> str:
        """'live', 'dead' (past its expiry, or not renewed for its time to
        live) or 'refused' (a key is set and it is not signed with it)."""
        if value != self.value:
            self.value, self.since = value, time.monotonic()
        lease = read_token(self.name, value, self.key)
        if self.key is not None and value != "?" and not (lease and lease.signed):
            return "refused"
        ttl_s = min(lease.ttl_s, self.bound_s) if lease and lease.signed else self.ttl_s
        if lease is not None and time.time() > lease.expires + GRACE_S:
            return "dead"
        return "dead" if time.monotonic() - self.since > ttl_s else "live"


@contextlib.contextmanager
def _held(backend, name: str, owner: str, ttl_s: float, key: bytes | None):
    """Takes `name`'s lease for `owner`; yields None when taken (renewed
    while the body runs, then dropped), else the holder's token."""
    current = [token(name, owner, ttl_s, key)]
    holder = backend.acquire(name, current[0], ttl_s)
    if holder is not None:
        yield holder
        return
    stop = threading.Event()

    def beat():
        while not stop.wait(ttl_s / 3):
            renewed = token(name, owner, ttl_s, key)
            try:
                if not backend.renew(name, current[0], renewed, ttl_s):
                    return
            except Exception:  # noqa: BLE001 (the lease lapses; waiters take over)
                return
            current[0] = renewed

    thread = threading.Thread(target=beat, name="cutecall-lease", daemon=True)
    thread.start()
    try:
        yield None
    finally:
        stop.set()
        thread.join(ttl_s)
        with contextlib.suppress(Exception):
            backend.release(name, current[0])


def single_flight(backend, name: str, fetch: Callable, build: Callable, *,
                  owner: str, ttl_s: float, bound_s: float, label: str,
                  counters: dict, key: bytes | None = None) -> tuple:
    """(result, how): ``fetch()``'s value with how "remote", or ``build()``'s
    with how "compiled" (built under the lease, or alone past `bound_s` or
    after ``FORGED_TRIES`` refused leases). `fetch` returns None for a
    miss; `key` signs this process's leases and checks the others'.
    Backend errors propagate."""
    began, delay, waited_on = time.monotonic(), 0.02, None
    watch = Watch(name, key, ttl_s, bound_s)
    while True:
        got = fetch()
        if got is not None:
            if waited_on is not None:
                _waited(counters, label, waited_on, began)
            return got, "remote"
        with _held(backend, name, owner, ttl_s, key) as value:
            if value is None:
                if waited_on is not None:
                    counters["takeovers"] += 1
                    logger.info("remote lease take-over: %s, held by %s whose lease "
                                "expired, after %.1f s", label, waited_on,
                                time.monotonic() - began)
                got = fetch()
                return (got, "remote") if got is not None else (build(), "compiled")
        holder, verdict = watch.holder(value), watch.verdict(value)
        if verdict != "live":
            if _cleared(backend, watch, value, verdict, label):
                return build(), "compiled"
            waited_on = waited_on or holder
        elif holder != waited_on:
            logger.info("remote wait: %s is being compiled by %s", label, holder)
            waited_on = holder
        if time.monotonic() - began > bound_s:
            logger.warning("remote wait: %s still compiled by %s after %.0f s; "
                           "compiling it here too", label, holder, bound_s)
            return build(), "compiled"
        time.sleep(delay * random.uniform(0.5, 1.0))
        delay = min(delay * 2, 0.5)


def _cleared(backend, watch: Watch, value: str, verdict: str, label: str) -> bool:
    """Deletes a dead or refused lease (if it is still `value`); True when
    refused ones keep coming back and the caller should compile alone."""
    if verdict == "refused":
        watch.forged += 1
        logger.warning("remote lease for %s refused: %s is not signed with "
                       "CUTECALL_CACHE_SIGNING_KEY; %s", label, watch.holder(value),
                       "compiling without a lease" if watch.forged > FORGED_TRIES
                       else "it is deleted and taken over")
        if watch.forged > FORGED_TRIES:
            return True
    else:
        logger.info("remote lease of %s, held by %s, is dead (expired or not "
                    "renewed); it is deleted and taken over", label, watch.holder(value))
    backend.release(watch.name, value)
    return False


def _waited(counters: dict, label: str, holder: str, began: float) -> None:
    seconds = time.monotonic() - began
    counters["waits"] += 1
    counters["wait_s"] += seconds
    logger.info("remote wait: %s compiled by %s, loaded after %.2f s",
                label, holder, seconds)
