"""Bundles: compiled kernels shipped to processes without the CuTe DSL.

A bundle is a directory (format 3, docs/bundles.md)::

    manifest.txt           line-based text; last line: manifest-sha256 <hex>
    objects/<sha256>.o     one ELF object per distinct kernel object

``export`` writes one atomically (a temporary sibling directory renamed into
place). The one reader is the C++ one (``cutecall/bundle.h``; ``_read``
reaches it through ``_core``); the ``jax`` field is for Python only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from typing import Mapping

from .._driver import dsl
from .._driver.plan import decode_plan
from .._driver.call_record import CallRecord
from .._driver.compiled import CompiledKernel
from . import _runtime
from ._read import DIGEST_FIELD, FORMAT_VERSION, MANIFEST, NAME, OBJECTS, BundleError

READ_NAME = re.compile(r"[A-Za-z0-9_()]{1,64}")

__all__ = ["export", "export_cli"]


# -- writing -------------------------------------------------------------------

def _line(field: str, value) -> str:
    value = str(value)
    if "\n" in value or "\r" in value:
        raise BundleError(f"cutecall: bundle field {field!r} cannot hold a "
                          f"line break: {value!r}")
    return f"{field} {value}".rstrip(" ") + "\n"


def _layouts(call: CallRecord) -> str:
    """Per kernel operand (plan order), its XLA minor-to-major; '-' if
    unknown."""
    c = call.contract
    if c is None:
        return "-"
    return ";".join(
        ",".join(map(str, (c.in_layouts if op["source"] == 0
                           else c.out_layouts)[op["index"]]))
        for op in decode_plan(call.kernel.plan))


def _device_reads(name: str, reads) -> str:
    """``CompiledKernel.device_reads`` as the field's value:
    ``sm_count=132,max_active_clusters(2)=66``, sorted by name."""
    items = []
    for what, value in sorted(reads):
        if not READ_NAME.fullmatch(str(what)) or isinstance(value, bool) or \
                not isinstance(value, int) or value < 0:
            raise BundleError(f"cutecall: export: kernel {name!r}: device_reads holds "
                              f"({what!r}, {value!r}); each must be (a name of "
                              "[A-Za-z0-9_()], an int >= 0)")
        items.append(f"{what}={value}")
    return ",".join(items)


def _entry(name: str, call: CallRecord) -> str:
    k = call.kernel
    scalars = ",".join(f"{t}:{n}" for n, t in call.scalars) if \
        call.contract is not None else ",".join("?" for _ in range(k.plan[4]))
    lines = [_line("entry", name)] + [_line(f, v) for f, v in (
        ("kernel", k.name), ("key", k.key), ("arch", k.arch),
        ("function", k.function), ("sha256", k.sha256),
        ("size", len(k.module)), ("plan-version", k.plan[0]),
        ("plan", " ".join(map(str, k.plan))), ("operands", k.operand_names),
        ("symbols", k.symbol_names), ("num-slots", k.num_slots),
        ("scalars", scalars), ("layouts", _layouts(call)))]
    if k.device_reads:
        lines.append(_line("device-reads", _device_reads(name, k.device_reads)))
    if call.contract is not None:
        lines.append(_line("jax", json.dumps(call.contract.to_json(),
                                             sort_keys=True,
                                             separators=(",", ":"))))
    return "".join(lines) + "end\n"


def _as_calls(kernels) -> dict[str, CallRecord]:
    if isinstance(kernels, (CallRecord, CompiledKernel)):
        kernels = [kernels]
    items = kernels.items() if isinstance(kernels, Mapping) else \
        [(getattr(k, "name", None), k) for k in kernels]
    out: dict[str, CallRecord] = {}
    for name, k in items:
        if isinstance(k, CompiledKernel):
            k = CallRecord(k.name, k)
        if not isinstance(k, CallRecord):
            raise TypeError(f"cutecall: export: kernel {name!r} must be a "
                            "CompiledCall (cutecall.compile) or a "
                            f"CompiledKernel, got {type(k).__name__}: {k!r}")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ValueError(f"cutecall: export: kernel name {name!r} must "
                             "match [A-Za-z0-9_][A-Za-z0-9_.-]* (<= 128 chars)")
        if name in out:
            raise ValueError(f"cutecall: export: two kernels named {name!r}")
        out[name] = k
    if not out:
        raise ValueError("cutecall: export: no kernels given")
    return out


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, 0o644)


def export(path, kernels, *, overwrite: bool = False, header=None,
           namespace: str | None = None) -> str:
    """Writes `kernels` to the bundle directory `path`; returns its digest.

    Args:
      path: the bundle directory to create (its parent must exist).
      kernels: ``{name: CompiledCall or CompiledKernel}``, or an iterable of
        them (named by their ``.name``). A ``CompiledCall`` (from
        :func:`cutecall.compile`) runs from JAX, PyTorch and C++; a bare
        ``CompiledKernel`` from PyTorch and C++ only.
      overwrite: replace an existing bundle at `path` (never a directory
        that is not a bundle).
      header: also write a typed C++ header there (one function per entry,
        ``TensorRef<float, 1>`` operands: a wrong dtype, rank or arity does
        not compile; docs/cpp.md), in namespace `namespace` (default: the
        file's name, ``kernels.h`` -> ``kernels``).

    Example (from C++: ``kernels::vector_add(*bundle, a, b, c, stream)``)::

        s = jax.ShapeDtypeStruct(jax.export.symbolic_shape("n"), jnp.float32)
        add = cutecall.compile(kernels.vector_add, s, s,
                               output_shape_dtype=lambda a, b: a)
        cutecall.export("kernels.bundle", {"vector_add": add},
                        header="kernels.h")

    The write is atomic: readers see the old bundle or the new one, never a
    part. Same kernels, same bytes, same digest.
    """
    calls = _as_calls(kernels)
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path):
        if not overwrite:
            raise FileExistsError(f"cutecall: export: {path!r} exists; pass "
                                  "overwrite=True to replace the bundle")
        if not os.path.isfile(os.path.join(path, MANIFEST)):
            raise BundleError(f"cutecall: export: refusing to overwrite "
                              f"{path!r}: it is not a cutecall bundle (no "
                              f"{MANIFEST})")
    versions = {"cutecall": _version(), "dsl": dsl.dsl_version() or "none"}
    runtime = _runtime.runtime_field()
    text = "".join([_line("cutecall-bundle", FORMAT_VERSION),
                    _line("cutecall", versions["cutecall"]),
                    _line("dsl", versions["dsl"])] +
                   ([_line("dsl-runtime", runtime)] if runtime else []) +
                   [_entry(n, calls[n]) for n in sorted(calls)])
    digest = hashlib.sha256(text.encode()).hexdigest()
    text += _line(DIGEST_FIELD, digest)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-",
                           dir=os.path.dirname(path))
    try:
        os.mkdir(os.path.join(tmp, OBJECTS))
        for c in calls.values():
            obj = os.path.join(tmp, OBJECTS, c.kernel.sha256 + ".o")
            if not os.path.exists(obj):
                _write(obj, c.kernel.module)
        _write(os.path.join(tmp, MANIFEST), text.encode())
        for d in (os.path.join(tmp, OBJECTS), tmp):
            os.chmod(d, 0o755)
        old = None
        if os.path.lexists(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-",
                                   dir=os.path.dirname(path))
            os.rename(path, os.path.join(old, "bundle"))
        os.rename(tmp, path)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if header is not None:
        from ._header import write_header
        write_header(header, calls, digest, namespace)
    return digest


def _version() -> str:
    from .._version import __version__
    return __version__


# -- CLI -------------------------------------------------------------------------

def export_cli(argv: list[str]) -> int:
    """``cutecall export OUT SOURCE [--name NAME]... [--overwrite]
    [--header kernels.h [--namespace NS]]``.

    SOURCE is ``package.module[:function]`` or ``path/to/file.py[:function]``;
    the function (default ``bundle_kernels``) takes no arguments and returns
    ``{name: CompiledCall or CompiledKernel}`` (e.g. built with
    ``cutecall.compile``). ``--name`` exports only the named kernels.
    Returns the exit status: 0 written, 1 failed, 2 bad arguments.
    """
    import argparse
    import importlib
    import importlib.util
    p = argparse.ArgumentParser(
        prog="cutecall export", description="Write a bundle of compiled "
        "kernels (docs/bundles.md).")
    p.add_argument("out", help="bundle directory to write")
    p.add_argument("source", help="package.module[:function] or "
                   "file.py[:function]; the function (default bundle_kernels) "
                   "returns {name: cutecall.compile(...)}")
    p.add_argument("--name", action="append", default=None,
                   help="export only this kernel (repeatable)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing bundle at OUT")
    p.add_argument("--header", default=None,
                   help="also write a typed C++ header (one function per "
                   "kernel; docs/cpp.md)")
    p.add_argument("--namespace", default=None,
                   help="the header's C++ namespace (default: its file name)")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    target, _, fn_name = args.source.partition(":")
    fn_name = fn_name or "bundle_kernels"
    try:
        if target.endswith(".py"):
            spec = importlib.util.spec_from_file_location(
                "_cutecall_export_source", target)
            if spec is None or not os.path.isfile(target):
                raise FileNotFoundError(f"no such file: {target!r}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            raise AttributeError(f"{target!r} defines no function {fn_name!r}")
        kernels = fn()
        if not isinstance(kernels, Mapping):
            kernels = _as_calls(kernels)
        if args.name:
            missing = [n for n in args.name if n not in kernels]
            if missing:
                raise KeyError(f"{fn_name}() returned no kernel named "
                               f"{', '.join(map(repr, missing))}; it returned "
                               f"{', '.join(map(repr, sorted(kernels)))}")
            kernels = {n: kernels[n] for n in args.name}
        digest = export(args.out, kernels, overwrite=args.overwrite,
                        header=args.header, namespace=args.namespace)
    except Exception as e:  # report, don't trace back, at the command line
        print(f"cutecall export: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {len(kernels)} kernel(s), manifest-sha256 "
          f"{digest}")
    for name in sorted(kernels):
        k = kernels[name]
        k = k.kernel if isinstance(k, CallRecord) else k
        print(f"  {name}: {k.arch}, {len(k.module)} bytes, sha256 "
              f"{k.sha256[:16]}")
    return 0

