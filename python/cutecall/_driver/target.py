"""The target a kernel compiles for: the arch and the ``cute.compile``
options string.

The arch is, in order: one named in the compile options
(``--gpu-arch sm_100a``), ``$CUTECALL_ARCH``, the device the front launches
on (its compute capability), CUDA device 0 as the driver reports it
(``_core.device_arch``: no framework needed), else ``sm_90a`` (a machine
without a GPU compiles for the H100). No framework, no CuTe DSL.
"""

from __future__ import annotations

import functools
import os
import re

from .. import _core

ARCH_ENV = "CUTECALL_ARCH"
FALLBACK_ARCH = "sm_90a"


def arch_from_capability(major: int, minor: int) -> str:
    """"sm_90a" for compute capability 9.0: an 'a' suffix from 9.0 on, the
    arch-specific target cutecall compiles for (as ``_core.device_arch``)."""
    return f"sm_{int(major)}{int(minor)}{'a' if int(major) >= 9 else ''}"


@functools.lru_cache(maxsize=1)
def _device0_arch() -> str | None:
    return _core.device_arch(0)  # reads the driver once per process


def default_arch(device_arch: str | None = None) -> str:
    """``$CUTECALL_ARCH``, else `device_arch` (the front's device), else
    CUDA device 0's, else sm_90a."""
    return os.environ.get(ARCH_ENV) or device_arch or _device0_arch() or FALLBACK_ARCH


def resolve_options(compile_options: str | None,
                    device_arch: str | None = None) -> tuple[str, str]:
    """(options passed to cute.compile, target arch). An arch named in the
    options wins, then :func:`default_arch`."""
    options = (compile_options or "").strip()
    m = re.search(r"--gpu-arch[= ](\S+)", options)
    if m:
        return options, m.group(1)
    arch = default_arch(device_arch)
    return (options + f" --gpu-arch {arch}").strip(), arch


def check_arch(arch: str, known) -> None:
    """A ValueError naming where `arch` came from unless the CuTe DSL
    compiles for it (`known`: the DSL's arch names). Not a compile failure:
    no static fallback follows."""
    if arch in known:
        return
    source = (f"${ARCH_ENV}" if os.environ.get(ARCH_ENV) == arch
              else "--gpu-arch in the compile options, or the GPU")
    names = sorted(known, key=lambda a: (len(a), a))
    raise ValueError(f"cutecall: target arch {arch!r} (from {source}) is not one the "
                     f"CuTe DSL compiles for; it knows {', '.join(names)}")
