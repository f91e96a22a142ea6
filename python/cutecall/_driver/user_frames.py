"""Which frames, files and lines of a failure are the user's (or a kernel
author's), not the DSL's, cutecall's or a framework's: the packages whose
frames are internal (:func:`package_dirs`, :func:`is_internal`, resolved
from the imported modules, never from substrings of a path), the
``stacklevel`` of a warning raised while tracing (:func:`user_stacklevel`),
and where a compile failed, read from its exception chain
(:func:`exception_chain`, :func:`plain`): the line that raised
(:func:`raised_at`), the failing source line (:func:`failing_source`) and
its place (:func:`user_location`). ``compile_error`` words the error.
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import sys
import traceback

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Frames are internal when their file lies in one of these packages' real
# directories (resolved from the imported modules, never from substrings of
# a path: a user's project may live under a folder named "cutecall" or "jax").
_DSL = ("cutlass", "nvidia_cutlass_dsl")
_WARNING_INTERNAL = ("cutecall", "jax", "jaxlib", "torch") + _DSL
_COMPILE_INTERNAL = ("cutecall",) + _DSL
# cutecall's own kernels: a compile error's place is in them, as in a user's.
_KERNEL_CODE = ("cutecall.examples",)


def user_stacklevel() -> int:
    """The ``stacklevel`` of the first caller outside cutecall, JAX and the
    DSL, so a warning raised while tracing points at the user's line."""
    dirs = package_dirs(_WARNING_INTERNAL)
    frame, level = sys._getframe(1), 1
    while frame is not None:
        path = frame.f_code.co_filename
        if not is_internal(path, dirs) and not _is_contextlib(path):
            return level
        frame, level = frame.f_back, level + 1
    return 1


def package_dirs(names: tuple[str, ...]) -> tuple[str, ...]:
    """The real directories (with a trailing separator) of the packages
    `names` that are imported; a package not imported has no frames."""
    dirs = []
    for name in names:
        module = sys.modules.get(name)
        for d in getattr(module, "__path__", None) or ():
            dirs.append(_real(d).rstrip(os.sep) + os.sep)
    return tuple(dirs)


def is_internal(path: str, dirs: tuple[str, ...]) -> bool:
    """Whether source file `path` lies inside one of `dirs`."""
    return _real(path).startswith(dirs) if dirs else False


@functools.lru_cache(maxsize=4096)
def _real(path: str) -> str:
    if path.startswith("<"):  # "<frozen runpy>", "<string>": not a file
        return path
    return os.path.realpath(path)


def _is_contextlib(path: str) -> bool:
    import contextlib
    return _real(path) == _real(contextlib.__file__)


def plain(text: str) -> str:
    """`text` without its ANSI colors."""
    return _ANSI.sub("", text)


def exception_chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions that caused it, outermost first. The DSL
    keeps causes in ``.cause``; Python in ``__cause__``/``__context__``."""
    out, seen = [], set()
    e = exc
    while e is not None and id(e) not in seen:
        out.append(e)
        seen.add(id(e))
        nxt = getattr(e, "cause", None)
        if not isinstance(nxt, BaseException):
            nxt = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
        e = nxt
    return out


def raised_at(exc: BaseException) -> str:
    """The innermost frame of `exc` outside the DSL and cutecall: the line
    of the user's (or the kernel author's) code that raised."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    dirs = package_dirs(_COMPILE_INTERNAL)
    for f in reversed(frames):
        if not is_internal(f.filename, dirs):
            return f" (at {os.path.basename(f.filename)}:{f.lineno})"
    return ""


def failing_source(exc: BaseException) -> str:
    """The source line (of the kernel's or the user's code, not the DSL's or
    cutecall's) where a compile failed, or ""."""
    chain = list(reversed(exception_chain(exc)))  # innermost first
    library = _library()
    places = []
    for e in chain:  # a location chain or a DSL pointer names it
        text = plain(str(e))
        places += [(m.group(2), int(m.group(3))) for m in _MLIR_FRAME.finditer(text)]
        places += [(m.group(1), int(m.group(2))) for m in _POINTER.finditer(text + " ")]
    places = [(p, n) for p, n in places
              if not library(p) and linecache.getline(p, n).strip()]
    if places:
        path, line = _own_first(places)
        return linecache.getline(path, line).strip()
    frames = [f for e in chain for f in reversed(
        traceback.extract_tb(e.__traceback__) if e.__traceback__ else [])
        if not library(f.filename)]
    if frames:
        f = _own_first([(f.filename, f) for f in frames])[1]
        return (f.line or linecache.getline(f.filename, f.lineno)).strip()
    return ""


def _own_first(places: list) -> tuple:
    """The first of `places` ((path, ...), innermost first) outside the
    installed packages (site-packages): the user's own code before a
    library that wraps the DSL's operations (QuACK patches
    ``cute.Tensor.__setitem__``); else the first."""
    dirs = _installed_dirs()
    return next((p for p in places if not is_internal(p[0], dirs)), places[0])


@functools.lru_cache(maxsize=1)
def _installed_dirs() -> tuple[str, ...]:
    import site
    import sysconfig
    found = set(getattr(site, "getsitepackages", lambda: [])())
    found.add(getattr(site, "getusersitepackages", lambda: "")() or "")
    found |= {sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib")}
    found |= {p for p in sys.path  # another environment's, through a .pth file
              if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")}
    return tuple(_real(d).rstrip(os.sep) + os.sep for d in found if d)


# An MLIR location naming a function and its file position, as a location
# chain prints them (innermost first): "_kernel"("/path/k.py":20:4 to :19).
_MLIR_FRAME = re.compile(r'"([^"]*)"\("([^"]+)":(\d+):\d+')
_MLIR_FILE = re.compile(r'(?<![\w"(])"([^"]+\.py)":(\d+):\d+')
_POINTER = re.compile(r"-->\s+(\S+?):(\d+)(?::\d+)?\s")


def user_location(exc: BaseException) -> str:
    """Where in the user's (or the kernel author's) source a compile
    failed, as ``path:line (in function)``, or "": the innermost place
    outside the DSL and cutecall that an MLIR location chain names (a
    verifier's error, when ops carry locations), else the exception's
    traceback, else the DSL's ``--> file:line`` pointer."""
    library = _library()
    chain = list(reversed(exception_chain(exc)))  # innermost first
    places = []
    for e in chain:
        text = plain(str(e))
        places += [(m.group(2), m.group(3), m.group(1)) for m in _MLIR_FRAME.finditer(text)]
        places += [(m.group(1), m.group(2), "") for m in _MLIR_FILE.finditer(text)]
    if not any(not library(p[0]) for p in places):
        places = [(f.filename, f.lineno, f.name) for e in chain for f in reversed(
            traceback.extract_tb(e.__traceback__) if e.__traceback__ else [])
            if not f.filename.startswith("<")]
    if not any(not library(p[0]) for p in places):
        places = [(m.group(1), m.group(2), "") for e in chain
                  for m in _POINTER.finditer(plain(str(e)) + " ")]
    places = [p for p in places if not library(p[0])]
    if not places:
        return ""
    path, line, function = _own_first(places)
    return f"{_shown_path(path)}:{line}" + (f" (in {_function(function)})" if function else "")


def _function(name: str) -> str:
    """A function as the user wrote it: the DSL runs a kernel's branches as
    generated inner functions (``k.<locals>.if_region_0.<locals>.then_block_1``)."""
    return name.split(".<locals>.", 1)[0]


def _library():
    """Whether a source file is the DSL's or cutecall's machinery (not a
    kernel: cutecall's example kernels are code like a user's)."""
    internal, kernels = package_dirs(_COMPILE_INTERNAL), package_dirs(_KERNEL_CODE)
    return lambda path: is_internal(path, internal) and not is_internal(path, kernels)


def _shown_path(path: str) -> str:
    """A source path as errors show it: relative to the working directory
    when under it (editors and terminals open ``file:line`` links)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel
