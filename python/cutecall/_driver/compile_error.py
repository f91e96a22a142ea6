"""Compile failures a user can read: the DSL's root cause on the first line.

The CuTe DSL reports a failed compile as a multi-line, colored diagnostic
whose first line is empty and whose cause (an MLIR verifier message, an
exception raised inside the user's launcher) sits further down or in the
exception chain. :class:`CompileError` puts that cause on its first line,
with the kernel's name and the target arch; the DSL's full message follows
and stays available as ``dsl_message``.
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import sys
import traceback

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# An MLIR diagnostic line: "error: <location>: <message>"; locations are
# "unknown", "loc(...)" or "file:line:col".
_MLIR_ERROR = re.compile(
    r"^\s*error:\s*(?:unknown:\s*|loc\([^)]*\):\s*|[^\s:]+:\d+:\d+:\s*)?(.*)$")
# Frames are internal when their file lies in one of these packages' real
# directories (resolved from the imported modules, never from substrings of
# a path: a user's project may live under a folder named "cutecall" or "jax").
_DSL = ("cutlass", "nvidia_cutlass_dsl")
_WARNING_INTERNAL = ("cutecall", "jax", "jaxlib", "torch") + _DSL
_COMPILE_INTERNAL = ("cutecall",) + _DSL
# cutecall's own kernels: a compile error's place is in them, as in a user's.
_KERNEL_CODE = ("cutecall.examples",)


class CompileError(RuntimeError):
    """The CuTe DSL failed to compile a kernel.

    ``str(e)`` starts with ``cutecall: kernel '<name>' failed to compile for
    <arch> at <file>:<line> (in <function>): <root cause>`` (the place where
    known: the innermost frame of the user's or the kernel author's code).
    Attributes: ``kernel``, ``arch``, ``root_cause`` (that one line),
    ``dsl_message`` (the DSL's whole message, uncolored), ``source_line``
    (the kernel's source line that failed, where known: the static fallback
    reads which extents it compares), ``location`` (``file:line (in
    function)``, or "").
    """

    def __init__(self, message: str, *, kernel: str = "", arch: str = "",
                 root_cause: str = "", dsl_message: str = "", source_line: str = "",
                 location: str = ""):
        super().__init__(message)
        self.kernel = kernel
        self.arch = arch
        self.root_cause = root_cause
        self.dsl_message = dsl_message
        self.source_line = source_line
        self.location = location

    def head(self) -> str:
        """How the first line starts, up to the cause: ``cutecall: kernel
        'k' failed to compile for sm_90a at f.py:3 (in k): ``."""
        where = f" at {self.location}" if self.location else ""
        return f"cutecall: kernel '{self.kernel}' failed to compile for {self.arch}{where}: "

    def with_message(self, message: str, **changes) -> "CompileError":
        """A copy with another message (and attributes `changes`)."""
        fields = dict(kernel=self.kernel, arch=self.arch, root_cause=self.root_cause,
                      dsl_message=self.dsl_message, source_line=self.source_line,
                      location=self.location)
        fields.update(changes)
        out = CompileError(message, **fields)
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k not in fields})
        return out

    def relocated(self, location: str, source_line: str = "") -> "CompileError":
        """The error with `location` on its first line (found later: a
        second trace that records where each MLIR op was made)."""
        text = str(self)
        head = self.head()
        rest = text[len(head):] if text.startswith(head) else text
        out = self.with_message("", location=location,
                                source_line=source_line or self.source_line)
        out.args = (out.head() + rest,)
        return out


class StaticFallbackWarning(UserWarning):
    """A kernel did not compile with dynamic layouts and was compiled with
    static ones (one compile per shape). Shown once per kernel."""


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
    return _ANSI.sub("", text)


def _chain(exc: BaseException) -> list[BaseException]:
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


def _where(exc: BaseException) -> str:
    """The innermost frame of `exc` outside the DSL and cutecall: the line
    of the user's (or the kernel author's) code that raised."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    dirs = package_dirs(_COMPILE_INTERNAL)
    for f in reversed(frames):
        if not is_internal(f.filename, dirs):
            return f" (at {os.path.basename(f.filename)}:{f.lineno})"
    return ""


def _after_location(text: str) -> str:
    """An MLIR diagnostic's message without its leading location: a
    ``callsite(...)``/``loc(...)``/``"name"(...)`` chain of balanced
    parentheses (quotes honoured), then ``: ``."""
    depth, quoted, i = 0, False, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            quoted = not quoted
        elif not quoted and c == "(":
            depth += 1
        elif not quoted and c == ")":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(": ", i):
            return text[i + 2:]
        i += 1
    return text


def root_cause(exc: BaseException) -> str:
    """One line saying why a compile failed."""
    chain = _chain(exc)
    for e in reversed(chain):  # innermost first
        text = plain(str(e)).strip()
        for line in text.splitlines():
            m = _MLIR_ERROR.match(line)
            if m and m.group(1).strip():
                head = text.splitlines()[0].rstrip(":").strip()
                msg = m.group(1).strip()
                if msg.startswith(("callsite(", "loc(", '"')):
                    msg = _after_location(msg).strip()
                return f"{head}: {msg}" if head and head != line.strip() else msg
    root = chain[-1]
    if type(root).__module__.startswith("cutlass"):
        # A DSL diagnostic: its first "error...:" entry, continuation joined.
        lines = plain(str(root)).splitlines()
        for k, line in enumerate(lines):
            m = re.match(r"^\s*error(?:\[\w+\])?:\s*(.*)$", line)
            if not m:
                continue
            text, where = [m.group(1).strip()], ""
            for more in lines[k + 1:]:
                loc = re.match(r"^\s+-->\s+(.*?):(\d+):\d+\s*$", more)
                if loc:
                    where = f" (at {os.path.basename(loc.group(1))}:{loc.group(2)})"
                    break
                if not more.startswith("     ") or "|" in more or \
                        not more.strip():
                    break
                text.append(more.strip())
            return " ".join(text) + where
        first = next((ln.strip() for ln in lines if ln.strip()), type(root).__name__)
        return first + _where(root)
    text = next((ln.strip() for ln in plain(str(root)).splitlines() if ln.strip()),
                "")
    return f"{type(root).__name__}: {text}{_where(root)}"


def failing_source(exc: BaseException) -> str:
    """The source line (of the kernel's or the user's code, not the DSL's or
    cutecall's) where a compile failed, or ""."""
    chain = list(reversed(_chain(exc)))  # innermost first
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
# The DSL names the function it traces, cutecall's generated entry point.
_ENTRY = re.compile(r" in `cutecall_entry`")


def user_location(exc: BaseException) -> str:
    """Where in the user's (or the kernel author's) source a compile
    failed, as ``path:line (in function)``, or "": the innermost place
    outside the DSL and cutecall that an MLIR location chain names (a
    verifier's error, when ops carry locations), else the exception's
    traceback, else the DSL's ``--> file:line`` pointer."""
    library = _library()
    chain = list(reversed(_chain(exc)))  # innermost first
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


def unlocated(error: CompileError) -> bool:
    """An MLIR diagnostic at an ``unknown`` location with no place found:
    the ops were made without locations (a second trace can record them,
    ``compile_locate``)."""
    return not error.location and bool(re.search(r"error:\s*unknown:", error.dsl_message))


def compile_error(exc: BaseException, name: str, arch: str,
                  binding: str = "") -> CompileError:
    """The CompileError for a failed compile of kernel `name`; `binding`
    says how the call's arguments reached the launcher's parameters."""
    cause = root_cause(exc)
    full = plain(str(exc)).strip()
    location = user_location(exc)
    shown = _ENTRY.sub("", cause)
    if location:
        shown = re.sub(r" \(at [^()]*:\d+\)$", "", shown)
    error = CompileError("", kernel=name, arch=arch, root_cause=cause,
                         dsl_message=full, source_line=failing_source(exc),
                         location=location)
    parts = [error.head() + shown]
    if binding:
        parts.append(f"  launcher parameters: {binding}")
    if full and full != cause:
        parts.append("CuTe DSL message:\n" + full)
    error.args = ("\n".join(parts),)
    return error
