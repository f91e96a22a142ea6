"""The remote tier on any fsspec filesystem: ``gs://bucket/cutecall``,
``s3://bucket/cutecall``, ``az://...`` (with the filesystem's package,
e.g. gcsfs or s3fs, installed beside fsspec).

Same layout as ``file_backend`` (``v1/entries``, ``v1/leases``). A value is
one whole-object put (atomic on object stores; written to a temp name and
moved elsewhere). Object stores offer no portable conditional put through
fsspec, so a lease here is best effort: write, then read back and keep it
only if it still names this process. Two hosts may still compile the same
kernel now and then; the entries stay whole and verified either way.
"""

from __future__ import annotations

import json
import os
import time

import fsspec


class FsspecBackend:
    def __init__(self, url: str):
        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url)
        self.base = root.rstrip("/") + "/v1"

    def __repr__(self):
        return f"FsspecBackend({self.url!r})"

    def _path(self, kind: str, name: str) -> str:
        return f"{self.base}/{kind}/{name}"

    def get(self, name: str) -> bytes | None:
        try:
            return self.fs.cat_file(self._path("entries", name))
        except FileNotFoundError:
            return None

    def put(self, name: str, value: bytes) -> None:
        path = self._path("entries", name)
        self.fs.makedirs(f"{self.base}/entries", exist_ok=True)
        if getattr(self.fs, "protocol", None) in ("file", "local", ("file", "local")):
            tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
            self.fs.pipe_file(tmp, value)
            self.fs.mv(tmp, path)
        else:
            self.fs.pipe_file(path, value)  # one object put: whole or absent

    def _lease(self, name: str) -> dict | None:
        try:
            return json.loads(self.fs.cat_file(self._path("leases", name)))
        except FileNotFoundError:
            return None
        except ValueError:
            return {"owner": "?", "expires": time.time() + 1.0}

    def acquire(self, name: str, owner: str, ttl_s: float) -> str | None:
        held = self._lease(name)
        if held is not None and held.get("expires", 0) > time.time() \
                and held.get("owner") != owner:
            return str(held.get("owner", "?"))
        self.fs.makedirs(f"{self.base}/leases", exist_ok=True)
        self.fs.pipe_file(self._path("leases", name), json.dumps(
            {"owner": owner, "expires": time.time() + ttl_s}).encode())
        held = self._lease(name)  # last writer wins: are we it?
        return None if held and held.get("owner") == owner else \
            str((held or {}).get("owner", "?"))

    def renew(self, name: str, owner: str, renewed: str, ttl_s: float) -> bool:
        held = self._lease(name)
        if not held or held.get("owner") != owner:
            return False
        self.fs.pipe_file(self._path("leases", name), json.dumps(
            {"owner": renewed, "expires": time.time() + ttl_s}).encode())
        return True

    def release(self, name: str, owner: str) -> None:
        held = self._lease(name)
        if held and held.get("owner") == owner:
            try:
                self.fs.rm_file(self._path("leases", name))
            except FileNotFoundError:
                pass

    def stats(self) -> dict:
        try:
            found = self.fs.ls(f"{self.base}/entries", detail=True)
        except FileNotFoundError:
            found = []
        return {"entries": len(found), "bytes": sum(int(f.get("size") or 0) for f in found)}

    def ping(self) -> None:
        self.fs.ls(self.base.rsplit("/", 1)[0] or "/", detail=False)
