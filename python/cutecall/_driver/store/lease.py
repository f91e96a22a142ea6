"""One compile per key across processes and hosts: a lease per key in the
remote tier.

A process that misses takes the key's lease (``Backend.acquire``), looks
once more (the entry may have been published between its miss and the
lease), compiles and publishes, and drops the lease. While it compiles, a
thread renews the lease every third of its time to live, so a long compile
keeps it and a dead process loses it when it expires. The others wait with
backoff (20 ms doubling to 0.5 s, jittered), looking for the entry, and
load it; when the lease expires unpublished, the next waiter takes it over
and compiles. Past ``bound_s`` of waiting a process compiles on its own.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Callable

from ..log import logger

__all__ = ["single_flight"]


@contextlib.contextmanager
def _held(backend, name: str, owner: str, ttl_s: float):
    """Keeps `owner`'s lease alive while the body runs, then drops it."""
    stop = threading.Event()

    def beat():
        while not stop.wait(ttl_s / 3):
            try:
                if not backend.renew(name, owner, ttl_s):
                    return
            except Exception:  # noqa: BLE001 (the lease lapses; waiters take over)
                return

    thread = threading.Thread(target=beat, name="cutecall-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            backend.release(name, owner)


def single_flight(backend, name: str, fetch: Callable, build: Callable, *,
                  owner: str, ttl_s: float, bound_s: float, label: str,
                  counters: dict) -> tuple:
    """(result, how): ``fetch()``'s value with how "remote", or ``build()``'s
    with how "compiled" (built under the lease, or alone past `bound_s`).
    `fetch` returns None for a miss. Backend errors propagate."""
    began, delay, waited_on = time.monotonic(), 0.02, None
    while True:
        got = fetch()
        if got is not None:
            if waited_on is not None:
                _waited(counters, label, waited_on, began)
            return got, "remote"
        holder = backend.acquire(name, owner, ttl_s)
        if holder is None:
            if waited_on is not None:
                counters["takeovers"] += 1
                logger.info("remote lease take-over: %s, held by %s whose lease "
                            "expired, after %.1f s", label, waited_on,
                            time.monotonic() - began)
            with _held(backend, name, owner, ttl_s):
                got = fetch()
                if got is not None:
                    return got, "remote"
                return build(), "compiled"
        if holder != waited_on:
            logger.info("remote wait: %s is being compiled by %s", label, holder)
            waited_on = holder
        if time.monotonic() - began > bound_s:
            logger.warning("remote wait: %s still compiled by %s after %.0f s; "
                           "compiling it here too", label, holder, bound_s)
            return build(), "compiled"
        time.sleep(delay * random.uniform(0.5, 1.0))
        delay = min(delay * 2, 0.5)


def _waited(counters: dict, label: str, holder: str, began: float) -> None:
    seconds = time.monotonic() - began
    counters["waits"] += 1
    counters["wait_s"] += seconds
    logger.info("remote wait: %s compiled by %s, loaded after %.2f s",
                label, holder, seconds)
