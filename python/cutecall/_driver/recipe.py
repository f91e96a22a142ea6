"""Recipes: a warm call keyed by what the caller asked for, not by the
kernel object, so a process whose store holds the kernel needs neither the
kernel's library nor the CuTe DSL (nor torch, which such libraries import).

A recipe key is the SHA-256 of: the caller's recipe values (hashable,
fingerprinted by content), the kernel's name, how the call is made (which
arguments are arrays of which dtype and rank, scalars or None; the call
site's options), the target (arch and device properties), and the versions
*and installed files* of cutecall, the DSL and the kernel's packages, read
from package metadata (``RECORD``) without importing them. So it is stricter
than the specialization key: a change to any file of the kernel's package
(its helper modules too) is a new recipe.

The record under a recipe key holds one :class:`Variant` per specialization
seen: the store key of the compiled kernel and how a call meets it, recorded
as a bundle records a kernel (``call_record``: runtime scalars, the JAX call
contract with XLA layouts, aliases and the vmap declaration; for the torch
front's calls, the torch contract: parameters, outputs, how each leaf of a
call reaches the plan, and the layout classes compiled for). A hit loads the
kernel by its key (digests checked, signed entries verified, as every entry)
and calls it as a bundle's kernel is called (``CompiledCall``); a variant
fits a call when the call's extents meet the kernel's static extents and
divisibility classes. A miss takes the full path and
adds a variant. Records live where kernels live, in both tiers, signed and
verified as kernel entries are (``store.records``; on the remote tier the
newest writer's record wins, so a variant another host added at the same
moment may be compiled once more). No framework, no CuTe DSL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import threading
from typing import Any, Sequence

from .call_record import JaxContract, TorchContract
from .fingerprint import fingerprint
from .plan import PLAN_VERSION, decode_plan

KIND = "recipe"
RECIPES_ENV = "CUTECALL_RECIPES"  # "0": no recipe lookups (the full path)
# What every recipe depends on besides the kernel's own packages.
BASE_PACKAGES = ("cutecall", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base",
                 "nvidia-cutlass-dsl-libs-core", "nvidia-cutlass-dsl-libs-cu13",
                 "nvidia-cutlass-dsl-libs-cu12")
MAX_VARIANTS = 64


@functools.lru_cache(maxsize=64)
def package_digest(name: str) -> str | None:
    """``version:sha256`` over an installed distribution's files and their
    hashes as its RECORD lists them (the package's own files: not its
    ``.dist-info``, scripts or bytecode, which differ between installs of
    the same wheel), or over its ``.py`` files' bytes when the RECORD has no
    hashes (an editable install); None when not installed. Imports nothing
    of the package."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    h = hashlib.sha256()
    files = [f for f in dist.files or () if not str(f).startswith("..")
             and ".dist-info" not in str(f) and not str(f).endswith(".pyc")]
    hashed = sorted((str(f), f.hash.value) for f in files if f.hash is not None)
    if hashed:
        for path, digest in hashed:
            h.update(f"{path}\0{digest}\n".encode())
    else:
        for f in sorted(files, key=str):
            if str(f).endswith(".py"):
                try:
                    h.update(str(f).encode() + b"\0" + f.locate().read_bytes())
                except OSError:
                    h.update(str(f).encode() + b"\0?")
    return f"{dist.version}:{h.hexdigest()}"


def recipe_key(values: Any, *, name: str, call: Any, target: dict,
               packages: Sequence[str] = ()) -> str:
    """The recipe key (hex). `values`: the caller's recipe (hashable
    values); `call`: how the call is made (JSON-able); `target`:
    ``Target.key()``; `packages`: the kernel's distributions (by name)."""
    names = tuple(BASE_PACKAGES) + tuple(sorted(set(packages) - set(BASE_PACKAGES)))
    doc = {"kind": KIND, "recipe": fingerprint(values, "recipe"), "name": name,
           "call": call, "target": target, "plan": PLAN_VERSION,
           "packages": {n: package_digest(n) for n in names}}
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


def site_fingerprint(options: dict, what: str) -> str:
    """The fingerprint of a call site's options, for ``recipe_key(site=)``:
    mappings as sorted item tuples, sequences as tuples, by content."""
    def content(value):
        if isinstance(value, dict):
            return tuple(sorted((repr(k), content(v)) for k, v in value.items()))
        if isinstance(value, (list, tuple)):
            return tuple(content(v) for v in value)
        return value
    return fingerprint(content(options), what)


def enabled() -> bool:
    """Whether recipe calls look up records (``CUTECALL_RECIPES`` is not
    ``0``); off, every call takes the full path."""
    return os.environ.get(RECIPES_ENV) != "0"


@dataclasses.dataclass(frozen=True)
class Variant:
    """One specialization a recipe led to: the kernel's store key, and how a
    call meets it as a bundle records a kernel (``call_record``): its name,
    runtime scalars ``(name, DSL type)`` in the call's order, and the call
    contract of the front that made it: JAX's (``jax``; a hit is a
    ``CompiledCall`` of these and the loaded kernel) or torch's (``torch``;
    a hit is a ``_core.KernelEntry`` of the loaded kernel). A record holds
    one field or the other; a front skips variants without its own."""

    key: str
    name: str
    scalars: tuple
    contract: JaxContract | None
    torch: TorchContract | None = None

    def to_json(self) -> dict:
        doc = {"key": self.key, "name": self.name,
               "scalars": [list(s) for s in self.scalars]}
        if self.contract is not None:
            doc["jax"] = self.contract.to_json()
        if self.torch is not None:
            doc["torch"] = self.torch.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "Variant":
        if "jax" not in doc and "torch" not in doc:
            raise KeyError("jax")
        return cls(str(doc["key"]), str(doc["name"]),
                   tuple((str(n), str(t)) for n, t in doc["scalars"]),
                   JaxContract.from_json(doc["jax"]) if "jax" in doc else None,
                   TorchContract.from_json(doc["torch"]) if "torch" in doc else None)


def fits(kernel, inputs, outputs=()) -> bool:
    """Whether a call's operands meet what `kernel` was compiled for (its
    plan): each static extent and stride, each dynamic extent's and
    stride's divisibility class, tied dims equal. `inputs`, `outputs`:
    ``(shape, strides)`` per operand of each source (an extent or stride
    may be None: symbolic, checked by C++ at launch). A call that does not
    fit takes the full path, whose checks name what is wrong."""
    tied: dict = {}
    for op in decode_plan(kernel.plan):
        side = inputs if op["source"] == 0 else outputs
        if op["index"] >= len(side):
            return False
        shape, strides = side[op["index"]]
        for values, static in ((shape, op["static"]), (strides, op["static_stride"])):
            for d, extent in static:
                if d >= len(values) or (isinstance(values[d], int) and values[d] != extent):
                    return False
        for values, dynamic in ((shape, op["dynamic"]), (strides, op["dyn_stride"])):
            for d, div, *_ in dynamic:
                if d >= len(values) or (isinstance(values[d], int) and values[d] % div):
                    return False
        for d, _div, *symbol in op["dynamic"]:  # tied dims (TensorSpec.dims) agree
            if symbol and symbol[0] >= 0 and isinstance(shape[d], int) and \
                    tied.setdefault(symbol[0], shape[d]) != shape[d]:
                return False
    return True


def load(key: str, arch: str) -> list[Variant]:
    """The variants recorded under recipe `key` (any tier), or []."""
    from .store import records
    meta = records.shared_record(key, arch, KIND)
    if not meta:
        return []
    try:
        return [Variant.from_json(v) for v in meta.get("variants", ())]
    except (KeyError, TypeError, ValueError):
        return []  # a record of another format: rebuilt by the next miss


_collectors: list = []
_collectors_lock = threading.Lock()


@contextlib.contextmanager
def collecting():
    """Collects ``(recipe key, arch, Variant)`` of every recipe call made
    inside (recorded or served): what a pack of those calls holds."""
    seen: list = []
    with _collectors_lock:
        _collectors.append(seen)
    try:
        yield seen
    finally:
        with _collectors_lock:
            _collectors.remove(seen)


class VariantCache:
    """A call site's variants per recipe key that carry its front's contract
    (`front`: "jax" or "torch"), each with its kernel when a pack supplied
    it (else None: load it): the stores' record, else the packs' entries.
    Forgotten when ``cutecall.clear_cache()`` runs."""

    def __init__(self, front: str):
        self.front = front
        self._lock = threading.Lock()
        self._variants: dict[str, list] = {}
        self._generation = -1

    def get(self, key: str, arch: str) -> list:
        from . import packs
        from .store import memory
        with self._lock:
            if self._generation != memory.generation():
                self._variants, self._generation = {}, memory.generation()
            found = self._variants.get(key)
        if found is None:
            own = (lambda v: v.torch is not None) if self.front == "torch" else \
                (lambda v: v.contract is not None)
            found = [(v, None) for v in load(key, arch) if own(v)]
            if not found:
                found = [(self._variant(r, c), r.kernel) for r, c in packs.find(key, self.front)
                         if r.kernel.arch == arch]
            with self._lock:
                self._variants[key] = found
        return found

    def _variant(self, record, contract) -> Variant:
        """A pack entry as a variant (a torch contract carries its scalars)."""
        k = record.kernel
        if self.front == "torch":
            return Variant(k.key, k.name, (), None, contract)
        return Variant(k.key, k.name, record.scalars, contract)

    def forget(self, key: str) -> None:
        """After a variant is added under `key`: read the record again."""
        with self._lock:
            self._variants.pop(key, None)


def used(key: str, arch: str, variant: Variant) -> None:
    """A recipe call met `variant` (for :func:`collecting`)."""
    with _collectors_lock:
        for seen in _collectors:
            seen.append((key, arch, variant))


def add(key: str, arch: str, variant: Variant) -> None:
    """Adds `variant` to the record under recipe `key` (newest first,
    bounded; the same kernel once)."""
    used(key, arch, variant)
    from .store import records
    known = [v for v in load(key, arch) if v.key != variant.key]
    variants = [variant] + known[:MAX_VARIANTS - 1]
    records.share_record(key, arch, KIND, {"variants": [v.to_json() for v in variants]})


_facts: dict = {}
_facts_lock = threading.Lock()


def recipe_fact(name: str, values: Any, compute, *, packages: Sequence[str] = ()):
    """What ``compute()`` answers about a kernel library for `values` (a
    JSON-able value: FA4's tile sizes for a config, say), remembered across
    processes like a recipe: under a key of `name`, the values, and the
    installed files of cutecall, the DSL and `packages`, in the store's
    tiers. A warm process gets the answer without importing the library::

        tiles = cutecall.recipe_fact(
            "fa4-bwd-tiles", (arch, dtype, hdim), lambda: fa4_bwd_tiles(...),
            packages=("flash-attn-4",))

    `values` must determine the answer. ``compute`` runs once per key (the
    first process to ask); its answer must be JSON-able."""
    key = recipe_key(values, name=f"fact:{name}", call=None, target={},
                     packages=packages)
    with _facts_lock:
        if key in _facts:
            return _facts[key]
    from .store import records
    meta = records.shared_record(key, "", "fact")
    if meta is None or "value" not in meta:
        value = json.loads(json.dumps(compute()))
        records.share_record(key, "", "fact", {"name": name, "value": value})
    else:
        value = meta["value"]
    with _facts_lock:
        _facts[key] = value
    return value
