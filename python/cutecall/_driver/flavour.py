"""Which CUDA flavour of the CuTe DSL this process runs: ``cu12`` or ``cu13``.

``nvidia-cutlass-dsl`` ships one compiler module and one runtime library per
CUDA major version (``pip install nvidia-cutlass-dsl`` installs cu12,
``nvidia-cutlass-dsl[cu13]`` adds cu13). When it is imported, the DSL loads
the newest installed flavour the driver supports (``cuDriverGetVersion``'s
major >= the flavour's), or the newest installed one without a driver
(nvidia-cutlass-dsl 4.8, ``cutlass/_mlir/_mlir_libs/__init__.py``).
cutecall follows the same rule, so the kernels the DSL compiles and the
runtime library cutecall's C++ core loads them with always agree; the
flavour is part of every compile key.

``CUTECALL_DSL_FLAVOUR=cu12`` (or ``cu13``) pins the flavour instead: set
before the process imports the DSL, ``import cutecall`` makes the DSL load
that flavour (a CUDA 13 driver runs cu12 code). Pinned after the DSL chose
otherwise, the first compile or launch says so.

    $ CUTECALL_DSL_FLAVOUR=cu12 python train.py
    $ cutecall doctor        # flavour cu12 (pinned), runtime path, driver CUDA

Reads files and the driver; never imports the DSL.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import importlib.abc
import importlib.util
import os
import re
import sys

from .. import _core

ENV = "CUTECALL_DSL_FLAVOUR"
_IR_MODULE = "cutlass._mlir._mlir_libs._cutlass_ir"
_IR_GLOB = os.path.join("nvidia_cutlass_dsl", "dsl_packages", "cutlass", "_mlir",
                        "_mlir_libs", "_cutlass_ir.cu*.so")


class FlavourError(RuntimeError):
    """``cutecall.FlavourError``: the CUDA flavour of the CuTe DSL (cu12 or
    cu13) cannot run here, raised by the first compile or launch (not a
    compile failure: no static fallback runs). The message says which case
    and what to do: no flavour is installed, the one pinned by
    ``CUTECALL_DSL_FLAVOUR`` is not (or the value is not cu12/cu13), it
    needs a newer driver than this one, or the DSL already loaded another
    (import cutecall before cutlass so the pin applies).

    Example::

        import cutecall
        try:
            y = call(x)
        except cutecall.FlavourError as e:
            print(e)      # ... flavour cu13 (...) needs a driver for CUDA 13.0 ...
            raise

    ``cutecall doctor`` reports the same check as its ``dsl flavour`` line.
    """


@dataclasses.dataclass(frozen=True)
class Flavour:
    major: int                 # 12 or 13
    ir_module: str             # the DSL's compiler module for this flavour
    runtime: str | None        # its libcute_dsl_runtime.so
    how: str = "newest the driver supports"   # why this one

    @property
    def name(self) -> str:
        return f"cu{self.major}"


def installed() -> dict[int, Flavour]:
    """The installed flavours by CUDA major, found on ``sys.path``."""
    found: dict[int, Flavour] = {}
    for base in sys.path:
        for so in sorted(glob.glob(os.path.join(base or ".", _IR_GLOB))):
            m = re.search(r"_cutlass_ir\.cu(\d+)\.", os.path.basename(so))
            if not m or int(m.group(1)) in found:
                continue
            major = int(m.group(1))
            lib = os.path.join(base or ".", "nvidia_cutlass_dsl", f"cu{major}", "lib",
                               "libcute_dsl_runtime.so")
            found[major] = Flavour(major, so, lib if os.path.exists(lib) else None)
    return found


def driver_version() -> int | None:
    """The CUDA version the driver supports (13000 = 13.0), None without one."""
    return _core.driver_cuda_version()


def _text(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def pinned() -> int | None:
    value = os.environ.get(ENV, "").strip().lower()
    if not value:
        return None
    m = re.fullmatch(r"(?:cu)?(\d+)", value)
    if not m:
        raise FlavourError(f"cutecall: {ENV}={value!r}: expected cu12 or cu13")
    return int(m.group(1))


def choose(available: dict[int, Flavour], driver: int | None,
           pin: int | None) -> Flavour:
    """The DSL's rule, or the pin. Raises FlavourError naming the flavours
    and the driver when none can run."""
    names = ", ".join(f"cu{m}" for m in sorted(available)) or "none"
    if not available:
        raise FlavourError("cutecall: no CuTe DSL flavour installed: pip install "
                           "'cutecall[cu12]' or 'cutecall[cu13]'")
    if pin is not None:
        if pin not in available:
            raise FlavourError(f"cutecall: {ENV}=cu{pin}, but the installed CuTe DSL "
                               f"flavours are {names}: pip install 'cutecall[cu{pin}]'")
        chosen = dataclasses.replace(available[pin], how=f"pinned by {ENV}")
    elif driver is None:
        chosen = dataclasses.replace(available[max(available)], how="newest installed (no driver)")
    else:
        fits = [m for m in available if driver // 1000 >= m]
        if not fits:
            raise FlavourError(
                f"cutecall: the NVIDIA driver supports CUDA {_text(driver)}, older "
                f"than every installed CuTe DSL flavour ({names}): install the cu12 "
                "flavour (pip install 'cutecall[cu12]') or update the driver")
        chosen = available[max(fits)]
    if driver is not None and driver // 1000 < chosen.major:
        raise FlavourError(
            f"cutecall: the CuTe DSL flavour cu{chosen.major} ({chosen.how}) needs a "
            f"driver for CUDA {chosen.major}.0 or newer; this driver supports CUDA "
            f"{_text(driver)}. Use the cu12 flavour or update the driver.")
    return chosen


def loaded_major() -> int | None:
    """The flavour the DSL already loaded in this process, if it did."""
    module = sys.modules.get(_IR_MODULE)
    m = re.search(r"_cutlass_ir\.cu(\d+)\.", getattr(module, "__file__", "") or "")
    return int(m.group(1)) if m else None


@functools.lru_cache(maxsize=1)
def _selected() -> Flavour:
    flavour = choose(installed(), driver_version(), pinned())
    loaded = loaded_major()
    if loaded is not None and loaded != flavour.major:
        raise FlavourError(
            f"cutecall: the CuTe DSL loaded cu{loaded}, but {flavour.how} is "
            f"cu{flavour.major}: import cutecall before cutlass so {ENV} applies, "
            f"or install one flavour only")
    return flavour


def selected() -> Flavour:
    """The flavour this process compiles and launches with (cached).
    Raises FlavourError when it cannot run here."""
    return _selected()


def name_or_none() -> str | None:
    """``"cu13"``, or None where no flavour can run (a key still forms)."""
    try:
        return selected().name
    except FlavourError:
        return None


def pin_dsl() -> None:
    """With ``CUTECALL_DSL_FLAVOUR`` set and the DSL not imported yet, loads
    that flavour's compiler module under the name the DSL looks up first,
    so the DSL's own import keeps it. A no-op otherwise (or when the pin
    cannot apply: the first compile reports why)."""
    if loaded_major() is not None or "cutlass" in sys.modules:
        return
    try:
        pin = pinned()
        flavour = installed().get(pin) if pin is not None else None
    except FlavourError:
        return
    if flavour is None:
        return
    spec = importlib.util.spec_from_file_location(_IR_MODULE, flavour.ir_module)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_IR_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(_IR_MODULE, None)
        raise
    sys.meta_path.insert(0, _BindToParent())


class _BindToParent(importlib.abc.MetaPathFinder):
    """Once the DSL imports ``cutlass._mlir._mlir_libs`` (whose own loader
    returns early: the pinned module is already in ``sys.modules``), binds
    the pinned module as its ``_cutlass_ir`` attribute, as the DSL's loader
    does (its preprocessor reads the attribute). Removes itself at once."""

    def find_spec(self, name, path, target=None):
        if name != _IR_MODULE.rpartition(".")[0]:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module._cutlass_ir = sys.modules[_IR_MODULE]
        spec.loader.exec_module = exec_module
        return spec
