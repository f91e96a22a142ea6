"""Importing a library's kernel modules without running its package
``__init__``: FA4's ``flash_attn/cute/__init__.py`` imports its torch
interface and every arch's kernels, and QuACK's imports its autotuner and
with it ``torch._dynamo`` (seconds of CPU), while a compile needs only the
few modules that define the kernel classes.

:func:`import_skipping_init` puts a bare package module (its ``__path__``
only) in place of each named package, then imports the kernel modules. The
bare package runs its real ``__init__``, in the same module object, the
first time code reads an attribute it lacks: ``import flash_attn.cute`` later
in the process gets the whole package, kernel modules included. If anything
fails (a kernel module that needs what the ``__init__`` sets up, a changed
layout of the package), the modules imported on the way are dropped and the
normal import runs, with a log line saying why. No framework.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
import threading
import types

from .log import logger

_lock = threading.Lock()


def _package_dir(name: str) -> str | None:
    """The directory of regular package `name` on ``sys.path`` (one with an
    ``__init__.py``), found without importing it or its parents."""
    parts = name.split(".")
    for entry in sys.path:
        d = os.path.join(entry or ".", *parts)
        if os.path.isfile(os.path.join(d, "__init__.py")):
            return d
    return None


def _bare(name: str, directory: str) -> types.ModuleType:
    """Package `name` with only its path: ``from pkg import sub`` imports
    the submodule; its ``__init__`` runs, in the same module object, the
    first time another attribute it lacks is read (PEP 562's module
    ``__getattr__``), so ``import pkg; pkg.anything`` still works later, and
    submodules stay its attributes."""
    module = types.ModuleType(name)
    init = os.path.join(directory, "__init__.py")
    module.__path__ = [directory]
    module.__file__ = init
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, origin=init,
                                                     is_package=True)
    module.__spec__.submodule_search_locations = [directory]
    module.__package__ = name
    state = {"ran": False}

    def __getattr__(attribute):
        if not state["ran"] and (os.path.isfile(os.path.join(directory, attribute + ".py"))
                                 or os.path.isdir(os.path.join(directory, attribute))):
            return importlib.import_module(f"{name}.{attribute}")  # from pkg import sub
        if not state["ran"] and not attribute.startswith("__"):
            state["ran"] = True
            del module.__getattr__  # the __init__ may define its own
            with open(init, encoding="utf-8") as f:
                exec(compile(f.read(), init, "exec"), module.__dict__)
            return getattr(module, attribute)
        raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
    module.__getattr__ = __getattr__
    return module


def import_skipping_init(modules, packages) -> list:
    """Imports `modules` (names) with the ``__init__`` of each of
    `packages` (names of regular packages not yet imported) skipped; returns
    the module objects. Falls back to the normal import, logging why::

        fwd, = import_skipping_init(["flash_attn.cute.flash_fwd_sm90"],
                                    ["flash_attn.cute", "quack"])
    """
    with _lock:
        if all(m in sys.modules for m in modules):
            return [sys.modules[m] for m in modules]
        before = set(sys.modules)
        bare = {}
        for p in packages:
            d = None if p in sys.modules else _package_dir(p)
            if d is not None:
                bare[p] = sys.modules[p] = _bare(p, d)
        try:
            found = [importlib.import_module(m) for m in modules]
        except Exception as e:  # noqa: BLE001 (any failure: the normal import)
            for name in set(sys.modules) - before:
                del sys.modules[name]
            logger.info("importing %s without the __init__ of %s failed (%s: %s); "
                        "importing normally", ", ".join(modules), ", ".join(bare),
                        type(e).__name__, e)
            return [importlib.import_module(m) for m in modules]
        return found
