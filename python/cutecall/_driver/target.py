"""The target a kernel compiles for: the arch, the device properties a
kernel may read while traced (``devices.DeviceProps``), and the
``cute.compile`` options string. Both the arch and the properties are part
of every key.

The arch is, in order: one named in the compile options
(``--gpu-arch sm_100a``), ``$CUTECALL_ARCH``, the device the front launches
on (its compute capability), CUDA device 0 as the driver reports it
(``_core.device_arch``: no framework needed), else ``sm_90a`` (a machine
without a GPU compiles for the H100).

The properties are the launching device's when its arch is the target's
(``_core.device_props``, matched to a row of ``devices.TABLE``), else
``$CUTECALL_DEVICE``'s row or the arch's default (B200 for sm_100a): never
those of a compiling host whose GPU is of another arch. No framework, no
CuTe DSL.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re

from .. import _core
from . import devices
from .devices import DeviceProps

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


@functools.lru_cache(maxsize=16)
def _driver_props(ordinal: int):
    return _core.device_props(ordinal)  # one driver read per device and process


@dataclasses.dataclass(frozen=True)
class Target:
    """What a kernel compiles for: `arch` ("sm_100a"), the `device` whose
    properties the kernel reads while traced, and the ``cute.compile``
    `options` (``--gpu-arch`` included). See :func:`resolve`."""

    arch: str
    device: DeviceProps
    options: str = ""

    @property
    def capability(self) -> tuple:
        return devices.capability_of(self.arch)

    def __str__(self):
        return (f"{self.arch} on {self.device.name} ({self.device.sm_count} SMs; "
                f"{self.device.source.split(':')[0]})")

    def key(self) -> dict:
        """What the target adds to a specialization key."""
        return {"arch": self.arch, "device": self.device.key()}

    def building(self):
        """A context in which kernel objects are built for this target: the
        CuTe DSL's arch is :attr:`arch`, and what a constructor (or a trace)
        reads of the GPU (``cutlass.utils.HardwareInfo``, the driver's
        attributes) answers with :attr:`device`, on any host::

            t = cutecall.current_target(arch="sm_100a")   # a B200
            with t.building():
                fwd = FlashAttentionForwardSm100(...)
        """
        from .hardware import building
        return building(self)


def current_target(arch: str | None = None, device: str | DeviceProps | None = None, *,
                   compile_options: str | None = None, ordinal: int | None = None
                   ) -> Target:
    """The :class:`Target` a compile in this process gets: `arch` (default:
    ``--gpu-arch`` in `compile_options`, ``$CUTECALL_ARCH``, the GPU, else
    sm_90a) and its device (`device`: a row of ``cutecall.DEVICES`` or its
    name, e.g. "h100-pcie"; default: the GPU `ordinal` when it is of that
    arch, else ``$CUTECALL_DEVICE``, else the arch's default row)::

        cutecall.current_target().arch                      # "sm_90a" on an H200
        cutecall.current_target("sm_100a").device.sm_count  # 148 (B200)
    """
    options = compile_options
    if arch is not None:
        if compile_options and re.search(r"--gpu-arch[= ]", compile_options):
            raise ValueError(f"cutecall: arch={arch!r} and --gpu-arch in compile_options "
                             f"{compile_options!r}: name the arch once")
        options = f"{compile_options or ''} --gpu-arch {arch}".strip()
    return resolve(options, None, ordinal, device)


def dsl_arch(arch: str):
    """Kernel objects built inside are for `arch` (and its default device):
    ``current_target(arch).building()``. For libraries whose constructors
    read the DSL's arch (FA4's and QuACK's)::

        with cutecall.dsl_arch("sm_100a"):
            kernel = FlashAttentionForwardSm100(...)
    """
    return current_target(arch).building()


def resolve(compile_options: str | None = None, device_arch: str | None = None,
            ordinal: int | None = None, device: str | DeviceProps | None = None) -> Target:
    """The target of a compile: the arch as :func:`resolve_options` picks it,
    and the device properties. `ordinal`: the CUDA device the front launches
    on (default 0), read when its arch is the target's; `device`: a row of
    ``devices.TABLE`` (or its name) to compile for instead."""
    options, arch = resolve_options(compile_options, device_arch)
    if isinstance(device, DeviceProps):
        props = device
    elif device is not None:
        props = devices.named(device, arch)
    else:
        props = _device_of(arch, 0 if ordinal is None else int(ordinal))
    return Target(arch, props, options)


def _device_of(arch: str, ordinal: int) -> DeviceProps:
    found = _driver_props(ordinal) if ordinal >= 0 else None
    if found is not None:
        capability = tuple(found["capability"])
        if capability == devices.capability_of(arch):
            return devices.from_driver(found)
    return devices.for_arch(arch)


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
