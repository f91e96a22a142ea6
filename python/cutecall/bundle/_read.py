"""Reading bundles: the manifest parser, verification and :class:`Bundle`.

Imports no CuTe DSL: a process that only loads bundles needs JAX, cutecall's
C++ core and ``libcute_dsl_runtime.so``. Everything is verified before
anything is used: the manifest's own digest (and a pinned one, if given),
the format and plan versions, every object's size, SHA-256, ELF symbols and
plan, and each entry's arch against the visible GPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from typing import Iterator, Mapping

from .. import _core
from .._driver import runtime as _runtime
from .._driver import spec as _spec
from .._driver.compiler import CompiledKernel
from ..jax._contract import CompiledCall, JaxContract

FORMAT_VERSION = 1
MANIFEST = "manifest.txt"
OBJECTS = "objects"
DIGEST_FIELD = "manifest-sha256"
OLDEST_PLAN_VERSION = 1
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ARCH = re.compile(r"sm_(\d+)(\d)([af]?)")
_SCALAR_TYPES = ("Boolean", "Int8", "Int16", "Int32", "Int64", "Uint8",
                 "Uint16", "Uint32", "Uint64", "Float32", "Float64")
_HEADER = ("cutecall", "dsl")
_ENTRY = ("kernel", "key", "arch", "function", "sha256", "size",
          "plan-version", "plan", "operands", "symbols", "num-slots",
          "scalars", "layouts")
_OPTIONAL = ("jax",)


class BundleError(ValueError):
    """A bundle cannot be written or read; the message names the bundle, the
    file or entry, and the field."""


def parse_manifest(data: bytes, where: str = MANIFEST):
    """Parses and checks manifest bytes: (header fields, {name: fields}).
    `where` prefixes every error (the bundle path and file)."""
    def fail(msg):
        raise BundleError(f"cutecall: bundle {where}: {msg}")

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"not UTF-8 text ({e})")
    if not text.endswith("\n") or "\r" in text:
        fail("truncated or not a cutecall manifest (no final line break, or "
             "CR characters)")
    lines = text[:-1].split("\n")
    field, _, value = lines[-1].partition(" ")
    if field != DIGEST_FIELD or not _HEX64.fullmatch(value):
        fail(f"last line must be '{DIGEST_FIELD} <64 hex>' (truncated?), got "
             f"{lines[-1][:80]!r}")
    body = text[:len(text) - len(lines[-1]) - 1]
    actual = hashlib.sha256(body.encode()).hexdigest()
    if actual != value:
        fail(f"field '{DIGEST_FIELD}' is {value} but the manifest's SHA-256 "
             f"is {actual} (tampered or corrupt)")
    if lines[0] != f"cutecall-bundle {FORMAT_VERSION}":
        fail(f"line 1: field 'cutecall-bundle' must be {FORMAT_VERSION} (this "
             f"cutecall reads format {FORMAT_VERSION}), got {lines[0][:80]!r}")
    header, entries, entry, name = {}, {}, None, None
    for n, line in enumerate(lines[1:-1], start=2):
        field, _, value = line.partition(" ")
        at = f"line {n}: " + (f"entry {name!r}: " if entry is not None else "")
        if entry is None and field in _HEADER and field not in header:
            header[field] = value
        elif entry is None and field == "entry":
            if not NAME.fullmatch(value) or value in entries:
                fail(f"{at}bad or repeated entry name {value!r}")
            entry, name = {}, value
        elif entry is not None and field == "end":
            missing = [f for f in _ENTRY if f not in entry]
            if missing:
                fail(f"{at}missing field(s) {', '.join(missing)}")
            entries[name] = _check_entry(entry, lambda m: fail(
                f"entry {name!r}: {m}"))
            entry = None
        elif entry is not None and field in _ENTRY + _OPTIONAL and \
                field not in entry:
            entry[field] = value
        else:
            fail(f"{at}unexpected or repeated field {field!r}")
    if entry is not None:
        fail(f"entry {name!r} has no 'end' line")
    missing = [f for f in _HEADER if f not in header]
    if missing:
        fail(f"missing header field(s) {', '.join(missing)}")
    if not entries:
        fail("no entries")
    return header, entries


def _int(v: str, field: str, fail) -> int:
    try:
        return int(v)
    except ValueError:
        fail(f"field '{field}' must be an integer, got {v[:80]!r}")


def _check_entry(e: dict, fail) -> dict:
    for f in ("key", "sha256"):
        if not _HEX64.fullmatch(e[f]):
            fail(f"field '{f}' must be 64 lower-case hex characters")
    if not _ARCH.fullmatch(e["arch"]):
        fail(f"field 'arch' must look like sm_90a, got {e['arch']!r}")
    if not e["function"] or not e["kernel"]:
        fail("fields 'function' and 'kernel' must not be empty")
    e["size"] = _int(e["size"], "size", fail)
    e["num-slots"] = _int(e["num-slots"], "num-slots", fail)
    version = _int(e["plan-version"], "plan-version", fail)
    if not OLDEST_PLAN_VERSION <= version <= _spec.PLAN_VERSION:
        fail(f"field 'plan-version' is {version}; this cutecall reads plan "
             f"versions {OLDEST_PLAN_VERSION}..{_spec.PLAN_VERSION}")
    e["plan"] = tuple(_int(x, "plan", fail) for x in e["plan"].split())
    if len(e["plan"]) < 5 or e["plan"][0] != version:
        fail(f"field 'plan' must start with its version {version}")
    scalars = [s for s in e["scalars"].split(",") if s]
    if len(scalars) != e["plan"][4]:
        fail(f"field 'scalars' lists {len(scalars)} scalars, the plan has "
             f"{e['plan'][4]}")
    e["scalars"] = tuple(() if s == "?" else tuple(s.split(":", 1)[::-1])
                         for s in scalars)
    for s in e["scalars"]:
        if s and (len(s) != 2 or s[1] not in _SCALAR_TYPES):
            fail(f"field 'scalars': bad entry {':'.join(s[::-1])!r}")
    if e["layouts"] != "-" and len(e["layouts"].split(";")) != e["plan"][3]:
        fail(f"field 'layouts' must list one layout per plan operand "
             f"({e['plan'][3]})")
    if "jax" in e:
        try:
            e["jax"] = JaxContract.from_json(json.loads(e["jax"]))
        except (ValueError, KeyError, TypeError, IndexError) as err:
            fail(f"field 'jax' is not a cutecall call contract: {err}")
    return e


def arch_runs_on(arch: str, major: int, minor: int) -> bool:
    """Whether code compiled for `arch` runs on compute capability
    major.minor: 'a' targets need that exact GPU; others any GPU of the same
    major and at least the minor."""
    m = _ARCH.fullmatch(arch)
    if m is None:
        return False
    a_major, a_minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
    if suffix == "a":
        return (a_major, a_minor) == (major, minor)
    return a_major == major and minor >= a_minor


def _device_capability():
    import jax
    try:
        devices = jax.devices("cuda")
    except RuntimeError:
        return None
    cc = getattr(devices[0], "compute_capability", None) if devices else None
    return tuple(int(x) for x in str(cc).split(".")[:2]) if cc else None


def _check_not_world_writable(path: str, at: str) -> None:
    """`at` starts the error: "cutecall: bundle '<path>'[: entry 'x']"."""
    if os.stat(path).st_mode & stat.S_IWOTH:
        raise BundleError(f"{at}: {path!r} is writable by other users; "
                          "refusing to load machine code from it")


class Bundle(Mapping):
    """A verified bundle: ``bundle[name]`` is a :class:`CompiledCall` (call
    it from JAX), ``bundle.compiled(name)`` its :class:`CompiledKernel`
    (for the PyTorch front and anything else that launches kernels)."""

    def __init__(self, path: str, digest: str, versions: dict,
                 calls: dict[str, CompiledCall]):
        self.path, self.digest, self.versions = path, digest, versions
        self._calls = calls

    def __getitem__(self, name: str) -> CompiledCall:
        try:
            return self._calls[name]
        except KeyError:
            raise KeyError(f"cutecall: bundle {self.path!r} has no kernel "
                           f"{name!r}; it has {', '.join(sorted(self._calls))}"
                           ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._calls))

    def __len__(self) -> int:
        return len(self._calls)

    def compiled(self, name: str) -> CompiledKernel:
        return self[name].kernel

    def __repr__(self):
        return (f"Bundle({self.path!r}, {len(self)} kernels, "
                f"digest={self.digest[:12]})")


def load_bundle(path, *, digest: str | None = None,
                check_arch: bool = True) -> Bundle:
    """Opens and verifies a bundle written by :func:`cutecall.export`.

    Args:
      path: the bundle directory.
      digest: the expected ``manifest-sha256`` (hex): pins the bundle's
        content, so a bundle rewritten with a fresh digest is refused too.
      check_arch: refuse entries compiled for an arch the first visible CUDA
        GPU cannot run (skipped when JAX sees no CUDA GPU).

    Raises:
      BundleError: naming the file, the entry and the field, for a missing
        or tampered file, a wrong format or plan version, a wrong arch.
    Never imports the CuTe DSL compiler; registers cutecall's FFI targets.
    """
    path = os.path.abspath(os.fspath(path))
    where = repr(path)
    manifest = os.path.join(path, MANIFEST)
    try:
        for p in (path, manifest):
            _check_not_world_writable(p, f"cutecall: bundle {where}")
        with open(manifest, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        raise BundleError(f"cutecall: bundle {where}: missing file "
                          f"{e.filename!r}") from None
    header, entries = parse_manifest(data, f"{where}: {MANIFEST}")
    actual = data.decode().rsplit("\n", 2)[-2].split(" ", 1)[1]
    if digest is not None and digest != actual:
        raise BundleError(f"cutecall: bundle {where}: field '{DIGEST_FIELD}' "
                          f"is {actual}, expected {digest}")
    capability = _device_capability() if check_arch else None
    calls = {}
    for name, e in entries.items():
        at = f"cutecall: bundle {where}: entry {name!r}"
        if capability and not arch_runs_on(e["arch"], *capability):
            raise BundleError(f"{at}: field 'arch' is {e['arch']}, which does "
                              f"not run on this GPU (compute capability "
                              f"{capability[0]}.{capability[1]})")
        calls[name] = CompiledCall(name, _read_kernel(path, e, at),
                                   tuple(s for s in e["scalars"] if s),
                                   e.get("jax"))
    _runtime.ensure_registered()
    return Bundle(path, actual, dict(header), calls)


def _read_kernel(path: str, e: dict, at: str) -> CompiledKernel:
    rel = f"{OBJECTS}/{e['sha256']}.o"
    obj = os.path.join(path, OBJECTS, e["sha256"] + ".o")
    try:
        _check_not_world_writable(obj, at)
        with open(obj, "rb") as f:
            module = f.read()
    except FileNotFoundError:
        raise BundleError(f"{at}: missing object file {rel!r}") from None
    if len(module) != e["size"]:
        raise BundleError(f"{at}: object {rel!r} has {len(module)} bytes, "
                          f"field 'size' says {e['size']} (truncated?)")
    actual = hashlib.sha256(module).hexdigest()
    if actual != e["sha256"]:
        raise BundleError(f"{at}: object {rel!r} has SHA-256 {actual}, field "
                          f"'sha256' says {e['sha256']} (tampered or corrupt)")
    try:
        slots = _core.check_plan(list(e["plan"]), e["kernel"], e["operands"],
                                 e["symbols"])
        _core.check_object(module, e["function"])
    except Exception as err:  # the core's messages name kernel and value
        raise BundleError(f"{at}: {err}") from None
    if slots != e["num-slots"]:
        raise BundleError(f"{at}: field 'num-slots' is {e['num-slots']}, the "
                          f"plan has {slots}")
    return CompiledKernel(
        name=e["kernel"], key=e["key"], module=module, sha256=actual,
        function=e["function"], plan=e["plan"], operand_names=e["operands"],
        symbol_names=e["symbols"], num_slots=slots, arch=e["arch"],
        compile_seconds=0.0)
