"""What an entry is stamped with: the versions of cutecall, the DSL and
CUDA it was compiled under, the target arch and, for kernels, the fields of
``CompiledKernel``. An entry whose stamp differs from the one the running
process would write is a miss (``docs/cache.md``, *Stamp*)."""

from __future__ import annotations

import dataclasses
import functools

from ..._version import __version__
from .. import dsl, flavour
from ..compiled import CompiledKernel
from .entry import FORMAT, Entry

__all__ = ["cuda_versions", "current_stamp", "kernel_fields", "kernel_stamp",
           "record_stamp", "rejection_stamp", "stamp_of"]


def cuda_versions() -> dict:
    """Versions of the CUDA pieces a compiled object depends on: the
    cuda-bindings the DSL drives and the DSL's CUDA library wheels."""
    names = ("cuda-bindings", "nvidia-cutlass-dsl-libs-cu13",
             "nvidia-cutlass-dsl-libs-cu12")
    return {n: v for n in names if (v := dsl.package_version(n))}


def current_stamp(arch: str) -> dict:
    """The stamp an entry compiled now for `arch` carries."""
    return dict(_versions_stamp(), arch=arch)


@functools.lru_cache(maxsize=1)
def _versions_stamp() -> dict:  # package metadata look-ups cost ~1 ms each
    return {"format": FORMAT, "cutecall": __version__,
            "dsl": dsl.dsl_version(), "flavour": flavour.name_or_none(),
            "cuda": cuda_versions()}


def kernel_fields() -> tuple[str, ...]:
    """CompiledKernel fields kept in an entry's meta (the bytes are the
    object; key, name and sha256 come from the entry and the caller)."""
    return tuple(f.name for f in dataclasses.fields(CompiledKernel)
                 if f.name not in ("module", "key", "name", "sha256", "entry"))


def kernel_stamp(arch: str) -> dict:
    """The stamp of a kernel entry: `current_stamp` plus CompiledKernel's
    field names, so a change of the kernel record invalidates entries."""
    return dict(current_stamp(arch), kernel_fields=",".join(kernel_fields()))


def record_stamp(arch: str, kind: str) -> dict:
    """The stamp of a small record (not a kernel) of kind `kind`."""
    return dict(current_stamp(arch), kind=kind)


def rejection_stamp(arch: str) -> dict:
    """The stamp of a record that the DSL rejected a specialization."""
    return record_stamp(arch, "rejection")


def stamp_of(entry: Entry) -> dict:
    """The stamp an entry of its kind would carry if written now (kernels,
    records that the DSL rejected a key, autotuning winners)."""
    if entry.meta.get("rejected"):
        return rejection_stamp(entry.stamp.get("arch", ""))
    if entry.meta.get("autotune"):
        return record_stamp(entry.stamp.get("arch", ""), "autotune")
    return kernel_stamp(entry.stamp.get("arch", ""))
