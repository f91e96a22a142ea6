"""Building and installing kernel packs (read by ``_driver.packs``).

:func:`build_pack` runs a pack source -- a function that, for one arch,
yields the calls to prebuild (each a zero-argument function that traces and
lowers recipe calls: ``cutecall.attention``'s common configurations, say) --
once per arch, compiling or loading every kernel the calls meet, and writes
the pack: a bundle of those kernels with their call contracts, and the table
from each call's recipe key to its bundle entries. :func:`install_pack`
puts a pack's kernels and recipe records into the store (the local tier,
and the remote one when ``CUTECALL_CACHE_REMOTE`` is set), so that every
process using the store finds them; a pack can also be used in place
(``$CUTECALL_PACKS``) or shipped in a wheel (entry point group
``cutecall.packs``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from typing import Callable, Iterable

from .._driver import packs as _packs, recipe as _recipe
from .._driver.call_record import CallRecord
from .._driver.store import lookup as _lookup, memory
from ._write import export


@contextlib.contextmanager
def _arch(arch: str):
    """``$CUTECALL_ARCH`` is `arch` inside (products read the target per
    call)."""
    saved = os.environ.get("CUTECALL_ARCH")
    os.environ["CUTECALL_ARCH"] = arch
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CUTECALL_ARCH", None)
        else:
            os.environ["CUTECALL_ARCH"] = saved


def collect(source: Callable[..., Iterable[Callable]], archs: Iterable[str],
            **options) -> list:
    """(recipe key, arch, Variant) of every recipe call `source(arch,
    **options)`'s calls make, per arch, without repeats."""
    seen, out = set(), []
    for arch in archs:
        with _arch(arch), _recipe.collecting() as used:
            for call in source(arch, **options):
                call()
        for key, a, variant in used:
            if (key, variant.key) not in seen:
                seen.add((key, variant.key))
                out.append((key, a, variant))
    return out


def build_pack(path: str, source, *, archs: Iterable[str], name: str = "",
               overwrite: bool = False, **options) -> dict:
    """Builds the pack `path` from `source` for `archs` (see the module);
    returns its table. Kernels come from the store when it has them, else
    are compiled."""
    start = time.perf_counter()
    archs = tuple(archs)
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path) and not overwrite:  # before any compile
        raise FileExistsError(f"cutecall: pack {path!r} exists; pass overwrite=True")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    found = collect(source, archs, **options)
    if not found:
        raise ValueError(f"cutecall: pack source {source!r} made no recipe calls for "
                         f"{', '.join(archs)}")
    records, table = {}, {}
    for key, arch, v in found:
        kernel = memory.load(v.key, v.name, arch)
        if kernel is None:
            raise RuntimeError(f"cutecall: kernel '{v.name}' (key {v.key[:16]}) of a "
                               "recipe is in no store; is the store off (CUTECALL_CACHE=0)?")
        entry = f"{v.name[:100]}.{v.key[:12]}"
        records[entry] = CallRecord(entry, kernel, v.scalars, v.contract)
        row = table.setdefault(key, {"arch": arch, "entries": []})
        row["entries"].append(entry)
        if v.torch is not None:  # a torch front's variant: its contract
            row.setdefault("torch", {})[entry] = v.torch.to_json()
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-",
                           dir=os.path.dirname(path))
    try:
        digest = export(os.path.join(tmp, _packs.BUNDLE), records)
        doc = {"cutecall-pack": _packs.FORMAT, "name": name, "archs": list(archs),
               "bundle-sha256": digest, "recipes": table, "options": repr(options),
               "kernels": len(records), "build-seconds": round(time.perf_counter() - start, 1)}
        doc[_packs.DIGEST_FIELD] = _packs.table_digest(doc)
        with open(os.path.join(tmp, _packs.TABLE), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
        os.chmod(tmp, 0o755)
        if os.path.lexists(path):
            shutil.rmtree(path)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return doc


def install_pack(path: str) -> dict:
    """Puts pack `path`'s kernels and recipe records into the store (every
    kernel verified by the bundle reader first); returns counts."""
    pack = _packs.Pack(os.path.abspath(os.fspath(path)))
    records = pack.records()
    kernels = recipes = 0
    for key, row in pack.table.get("recipes", {}).items():
        torch = pack.torch_contracts(key)
        for name in row.get("entries", ()):
            r = records[name]
            if r.contract is None and name not in torch:
                continue  # a call contract of no front: no recipe can meet it
            k = r.kernel
            _, how = _lookup.load_or_compile(k.key, k.name, k.arch, lambda k=k: k)
            kernels += how == "compiled"  # newly written: the pack's own bytes
            _recipe.add(key, row["arch"], _recipe.Variant(k.key, k.name, r.scalars,
                                                          r.contract, torch.get(name)))
            recipes += 1
    return {"kernels": kernels, "recipes": recipes, "entries": len(records)}
