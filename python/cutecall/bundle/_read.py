"""Reading bundles: :func:`load_bundle` and :class:`Bundle`.

The manifest has one reader, the C++ one (``cpp/src/bundle.cc``,
``ReadVerifiedBundle``), exposed as ``_core.read_bundle``: it verifies
everything before anything is used -- the manifest's own digest (and a
pinned one, if given), the format and plan versions, every object's size,
SHA-256, ELF symbols and plan, and each entry against the GPU (its arch,
and what its kernel read of its device while traced: the SM count, shared
memory) -- and
returns the verified fields and object bytes. This module turns them into
:class:`CompiledKernel` records. Imports no framework and no CuTe DSL: a
process that only loads bundles needs cutecall's C++ core, and JAX only to
call a kernel from JAX (``bundle[name]``).
"""

from __future__ import annotations

import os
import re
from typing import Iterator, Mapping

from .. import _core
from .._driver.call_record import CallRecord, record_of_entry
from .._driver.compiled import CompiledKernel

FORMAT_VERSION = 3  # written; the C++ reader reads 1..3
MANIFEST = "manifest.txt"
OBJECTS = "objects"
DIGEST_FIELD = "manifest-sha256"
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


class BundleError(ValueError):
    """A bundle cannot be written or read; the message names the bundle, the
    file or entry, and the field."""


class Bundle(Mapping):
    """A verified bundle: ``bundle[name]`` is a :class:`cutecall.CompiledCall`
    (call it from JAX; importing JAX then), ``bundle.compiled(name)`` its
    :class:`CompiledKernel` (for the PyTorch front and anything else that
    launches kernels), ``bundle.record(name)`` the framework-free
    :class:`CallRecord`."""

    def __init__(self, path: str, digest: str, versions: dict,
                 records: dict[str, CallRecord]):
        self.path, self.digest, self.versions = path, digest, versions
        self._records = records

    def record(self, name: str) -> CallRecord:
        try:
            return self._records[name]
        except KeyError:
            raise KeyError(f"cutecall: bundle {self.path!r} has no kernel "
                           f"{name!r}; it has {', '.join(sorted(self._records))}"
                           ) from None

    def __getitem__(self, name: str):
        from ..jax._contract import CompiledCall
        r = self.record(name)
        return CompiledCall(r.name, r.kernel, r.scalars, r.contract)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def compiled(self, name: str) -> CompiledKernel:
        return self.record(name).kernel

    def __repr__(self):
        return (f"Bundle({self.path!r}, {len(self)} kernels, "
                f"digest={self.digest[:12]})")


def load_bundle(path, *, digest: str | None = None,
                check_arch: bool = True) -> Bundle:
    """Opens and verifies a bundle written by :func:`cutecall.export`.

    Example::

        b = cutecall.load_bundle("kernels.bundle")
        y = b["vector_add"](x, x)              # from JAX
        k = b.compiled("vector_add")           # a CompiledKernel (torch, C++)

    Args:
      path: the bundle directory.
      digest: the expected ``manifest-sha256`` (hex): pins the bundle's
        content, so a bundle rewritten with a fresh digest is refused too.
      check_arch: check every entry against CUDA device 0 (skipped when
        there is no CUDA driver or device): refuse one compiled for an arch
        it cannot run, or whose kernel read another SM count, or more shared
        memory than the device has, while traced (``device_reads``: a
        persistent kernel sized for 148 SMs on a 132-SM GPU).

    Raises:
      BundleError: naming the bundle, the entry, the file and the field, for
        a missing or tampered file, a wrong format or plan version, a wrong
        arch or device (both values named), a malformed call contract.
    Never imports the CuTe DSL compiler, JAX or torch.
    """
    path = os.path.abspath(os.fspath(path))
    device_arch = (_core.device_arch(0) or "") if check_arch else ""
    device_props = _core.device_props(0) if check_arch else None
    try:
        contents = _core.read_bundle(path, digest or "", device_arch, device_props)
    except (ValueError, RuntimeError) as e:
        raise BundleError(str(e)) from None
    records = {}
    for e in contents.entries:
        try:
            records[e.name] = record_of_entry(e)
        except ValueError as err:
            raise BundleError(f"cutecall: bundle {path!r}: entry {e.name!r}: {err}") from None
    return Bundle(path, contents.digest, {"cutecall": contents.cutecall_version,
                                          "dsl": contents.dsl_version}, records)
