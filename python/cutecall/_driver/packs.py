"""Kernel packs, FlashInfer-style: prebuilt kernels a recipe finds without
compiling, shipped as a directory, installed into a store, or in a wheel.

A pack is a bundle (``kernels/``: objects and a manifest, each entry a
kernel with its call contract, verified by the C++ reader) plus ``pack.json``:
its table from recipe keys to bundle entries (with, for the torch front's
recipes, each entry's torch contract: field ``torch``), the bundle's
manifest digest (pinned), and the pack's own digest. A recipe the stores do not know is
looked up in the packs of ``$CUTECALL_PACKS`` (directories, ``os.pathsep``
separated) and of installed distributions (entry point group
``cutecall.packs``, each naming a directory); a hit loads the kernel from
the pack, its object's SHA-256 checked, and compiles nothing. Written by
``cutecall pack build`` (``cutecall.bundle``). No framework, no CuTe DSL.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import threading

from .. import _core
from .call_record import TorchContract, record_of_entry
from .log import logger

PACKS_ENV = "CUTECALL_PACKS"
ENTRY_POINTS = "cutecall.packs"
FORMAT = 1
TABLE = "pack.json"
BUNDLE = "kernels"
DIGEST_FIELD = "pack-sha256"


class PackError(ValueError):
    """A pack is malformed or tampered with; the message names the pack and
    the field."""


def table_digest(doc: dict) -> str:
    """The digest a pack's table carries: SHA-256 of its canonical JSON
    without the digest field."""
    body = {k: v for k, v in doc.items() if k != DIGEST_FIELD}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def read_table(path: str) -> dict:
    """A pack's verified table (``pack.json``): format, digest."""
    try:
        with open(os.path.join(path, TABLE)) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise PackError(f"cutecall: pack {path!r}: {TABLE} cannot be read: {e}") from None
    if not isinstance(doc, dict) or doc.get("cutecall-pack") != FORMAT:
        raise PackError(f"cutecall: pack {path!r}: {TABLE} is not a cutecall pack of "
                        f"format {FORMAT}")
    if doc.get(DIGEST_FIELD) != table_digest(doc):
        raise PackError(f"cutecall: pack {path!r}: {TABLE} does not match its "
                        f"{DIGEST_FIELD} (changed after it was built)")
    return doc


class Pack:
    """One pack, opened lazily: its table now, its bundle on the first hit."""

    def __init__(self, path: str):
        self.path = path
        self.table = read_table(path)
        self._records = None
        self._lock = threading.Lock()

    def entries(self, recipe_key: str) -> list[str]:
        found = self.table.get("recipes", {}).get(recipe_key)
        return list(found.get("entries", ())) if isinstance(found, dict) else []

    def torch_contracts(self, recipe_key: str) -> dict:
        """{entry: TorchContract} of the torch front's variants under
        `recipe_key` (the table's ``torch`` field; malformed ones skipped)."""
        found = self.table.get("recipes", {}).get(recipe_key)
        out = {}
        for name, doc in (found.get("torch") or {}).items() if isinstance(found, dict) \
                else ():
            try:
                out[name] = TorchContract.from_json(doc)
            except (KeyError, TypeError, ValueError):
                logger.warning("pack %r: entry %r has a malformed torch contract; "
                               "it is not used", self.path, name)
        return out

    def records(self) -> dict:
        """The bundle's entries as CallRecords, verified once (manifest
        digest pinned by the table, every object's SHA-256 and plan)."""
        with self._lock:
            if self._records is None:
                bundle = os.path.join(self.path, BUNDLE)
                try:
                    contents = _core.read_bundle(bundle, self.table.get("bundle-sha256", ""),
                                                 "")
                except (ValueError, RuntimeError) as e:
                    raise PackError(f"cutecall: pack {self.path!r}: {e}") from None
                self._records = {e.name: record_of_entry(e) for e in contents.entries}
            return self._records


@functools.lru_cache(maxsize=8)
def _packs(env: str) -> tuple:
    paths = [p for p in env.split(os.pathsep) if p]
    for ep in importlib.metadata.entry_points(group=ENTRY_POINTS):
        try:
            value = ep.load()
            paths.append(os.fspath(value() if callable(value) else value))
        except Exception as e:  # a broken plug-in never fails the job
            logger.warning("pack entry point %s cannot be loaded: %s", ep, e)
    out = []
    for p in paths:
        try:
            out.append(Pack(os.path.abspath(p)))
        except PackError as e:
            logger.warning("%s; it is not used", e)
    return tuple(out)


def packs() -> tuple:
    """The packs of ``$CUTECALL_PACKS`` and of installed distributions."""
    return _packs(os.environ.get(PACKS_ENV, ""))


def find(recipe_key: str, front: str) -> list:
    """(CallRecord, contract) of `front`'s variants ("jax" or "torch") the
    packs hold for `recipe_key`, first pack first: each record with its
    kernel, and the front's call contract (JAX's is the record's own)."""
    out = []
    for pack in packs():
        if front == "torch":
            contracts = pack.torch_contracts(recipe_key)
            if contracts:
                records = pack.records()
                out.extend((records[n], c) for n, c in contracts.items() if n in records)
            continue
        names = pack.entries(recipe_key)
        if names:
            records = pack.records()
            out.extend((r, r.contract) for r in (records[n] for n in names if n in records)
                       if r.contract is not None)
    return out
