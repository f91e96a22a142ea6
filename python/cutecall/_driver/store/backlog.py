"""Kernels compiled while the remote tier was down: remembered in the local
tier and published when it answers again, so other hosts load them instead
of compiling them too.

A kernel compiled here that the remote tier did not take (it was down,
slow, or in its minute of rest after failing) leaves a marker,
``v1/unpublished/<key>`` (an empty file, 0600) beside the entry. On the
next successful contact with the remote tier (a hit, a publish, a lease),
the process publishes up to ``AT_ONCE`` of them from the local tier's
verified entries, and removes their markers; one process at a time
(``unpublished.lock``), the rest skip. A marker whose entry is gone
(evicted, cleared) or fails verification is dropped. At most ``MAX_KEYS``
markers are kept: a longer outage publishes the first ones."""

from __future__ import annotations

import contextlib
import os

from ..log import logger
from .entry import CorruptEntry
from .local import ArtifactStore
from .local_files import check_private_dir, file_lock

__all__ = ["AT_ONCE", "MAX_KEYS", "pending", "publish", "remember"]

AT_ONCE = 16      # entries published per successful contact
MAX_KEYS = 1024   # markers kept


def _dir(store: ArtifactStore) -> str:
    return os.path.join(store.base, "unpublished")


def pending(store: ArtifactStore) -> list[str]:
    """Keys compiled here and not yet published, oldest first."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for d in os.scandir(_dir(store)):
            with contextlib.suppress(FileNotFoundError):
                found.append((d.stat().st_mtime, d.name))
    return [key for _, key in sorted(found)]


def remember(store: ArtifactStore, key: str) -> None:
    """Marks kernel `key` (in the local tier) as not yet published. Best
    effort: a failure to write the marker only costs other hosts a compile."""
    path = os.path.join(_dir(store), os.path.basename(store.path(key))[:-3])
    with contextlib.suppress(OSError):
        check_private_dir(_dir(store))
        if len(os.listdir(_dir(store))) < MAX_KEYS:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))


def publish(store: ArtifactStore, remote) -> int:
    """Publishes up to ``AT_ONCE`` remembered kernels to `remote` (a
    ``RemoteTier`` that just answered); how many. Stops at the first
    failure (the tier then rests a minute, ``remote_tier``)."""
    keys = pending(store)
    if not keys or remote.read_only:
        return 0
    published = 0
    with file_lock(os.path.join(store.base, "unpublished.lock"), False) as held:
        if not held:
            return 0
        for key in keys:
            if published >= AT_ONCE:
                break
            marker = os.path.join(_dir(store), key)
            try:
                entry = store.read(key)
            except (FileNotFoundError, CorruptEntry, ValueError):
                entry = None
            if entry is not None and not remote.publish(
                    key, entry.stamp, entry.meta, entry.data,
                    f"kernel '{entry.meta.get('name', '?')}'"):
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(marker)
            published += entry is not None
    if published:
        logger.info("remote tier %s answers again: published %d kernel(s) compiled "
                    "while it was down (%d left)", remote.url, published,
                    len(pending(store)))
    return published
