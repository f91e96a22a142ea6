"""The remote tier on a directory every host mounts (NFS, Lustre, a
FUSE-mounted bucket): ``file:///shared/cutecall-cache``.

Shared filesystems do not honour ``flock`` reliably, so nothing here uses
it. Layout under the URL's path::

    v1/entries/<name>       a published value
    v1/leases/<name>        a lease: JSON {"owner": the tier's token, "expires"}
    v1/tmp/                 writes in progress

A value is written to ``tmp/``, fsync'ed, then renamed over its name
(``rename`` is atomic on one filesystem, NFS included): readers see the old
value or the new one. A lease is a file created with ``O_CREAT | O_EXCL``
(exclusive on NFSv3+). A lease past its expiry is taken over by renaming it
aside (one renamer wins) and creating a new one; the renamed file is read
again, so a lease renewed meanwhile is put back, not stolen. Holders'
clocks are compared, so hosts should run NTP; a skew only costs a second
compile, never a wrong entry (entries are whole and verified).
"""

from __future__ import annotations

import contextlib
import json
import os
import time


class FileBackend:
    def __init__(self, url: str, path: str):
        self.url = url
        self.base = os.path.join(os.path.abspath(path), "v1")
        self.entries = os.path.join(self.base, "entries")
        self.leases = os.path.join(self.base, "leases")
        self.tmp = os.path.join(self.base, "tmp")
        self._made = False

    def __repr__(self):
        return f"FileBackend({self.url!r})"

    def _dirs(self) -> None:
        if not self._made:
            for d in (self.entries, self.leases, self.tmp):
                os.makedirs(d, mode=0o700, exist_ok=True)
            self._made = True

    def get(self, name: str) -> bytes | None:
        try:
            with open(os.path.join(self.entries, name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def _write(self, path: str, data: bytes) -> None:
        """`data` at `path` by temp file, fsync and rename."""
        self._dirs()
        tmp = os.path.join(self.tmp, f"{os.path.basename(path)}.{os.getpid()}."
                                     f"{os.urandom(4).hex()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def put(self, name: str, value: bytes) -> None:
        self._write(os.path.join(self.entries, name), value)

    # -- leases -----------------------------------------------------------------
    @staticmethod
    def _read_lease(path: str) -> dict | None:
        """The lease at `path`; None if there is none. One being written
        (empty or half) reads as held, by "?", until a second past its mtime."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
            mtime = os.stat(path).st_mtime
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw)
            return {"owner": str(doc["owner"]), "expires": float(doc["expires"])}
        except (ValueError, KeyError, TypeError):
            return {"owner": "?", "expires": mtime + 1.0}

    def acquire(self, name: str, owner: str, ttl_s: float) -> str | None:
        self._dirs()
        path = os.path.join(self.leases, name)
        for _ in range(3):
            body = json.dumps({"owner": owner, "expires": time.time() + ttl_s}).encode()
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                held = self._read_lease(path)
                if held is None:
                    continue  # released meanwhile
                if held["expires"] > time.time():
                    return held["owner"]
                if not self._set_aside(path):
                    return held["owner"]
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            return None
        return "?"

    def _set_aside(self, path: str) -> bool:
        """Moves an expired lease out of the way; False when it turned out
        to be live (renewed or replaced meanwhile: it is put back)."""
        aside = f"{path}.expired.{os.getpid()}.{os.urandom(4).hex()}"
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return True  # another waiter moved it: race for the new one
        held = self._read_lease(aside)
        live = held is not None and held["expires"] > time.time()
        if live:
            with contextlib.suppress(FileExistsError, FileNotFoundError):
                os.link(aside, path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(aside)
        return not live

    def renew(self, name: str, owner: str, renewed: str, ttl_s: float) -> bool:
        path = os.path.join(self.leases, name)
        held = self._read_lease(path)
        if held is None or held["owner"] != owner:
            return False
        self._write(path, json.dumps({"owner": renewed,
                                      "expires": time.time() + ttl_s}).encode())
        return True

    def release(self, name: str, owner: str) -> None:
        path = os.path.join(self.leases, name)
        held = self._read_lease(path)
        if held is not None and held["owner"] == owner:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def stats(self) -> dict:
        entries = total = 0
        with contextlib.suppress(FileNotFoundError):
            for d in os.scandir(self.entries):
                with contextlib.suppress(FileNotFoundError):
                    total += d.stat().st_size
                    entries += 1
        return {"entries": entries, "bytes": total}

    def ping(self) -> None:
        self._dirs()
        if not os.access(self.base, os.R_OK | os.W_OK | os.X_OK):
            raise PermissionError(f"{self.base} is not readable and writable")
