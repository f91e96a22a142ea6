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


class CompileError(RuntimeError):
    """The CuTe DSL failed to compile a kernel.

    ``str(e)`` starts with ``cutecall: kernel '<name>' failed to compile for
    <arch>: <root cause>``. Attributes: ``kernel``, ``arch``, ``root_cause``
    (that one line), ``dsl_message`` (the DSL's whole message, uncolored),
    ``source_line`` (the kernel's source line that failed, where known: the
    static fallback reads which extents it compares).
    """

    def __init__(self, message: str, *, kernel: str = "", arch: str = "",
                 root_cause: str = "", dsl_message: str = "", source_line: str = ""):
        super().__init__(message)
        self.kernel = kernel
        self.arch = arch
        self.root_cause = root_cause
        self.dsl_message = dsl_message
        self.source_line = source_line


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
    chain = _chain(exc)
    for e in reversed(chain):  # a DSL diagnostic names it: "--> file:line:col"
        for m in re.finditer(r"-->\s+(.*?):(\d+):\d+", plain(str(e))):
            line = linecache.getline(m.group(1), int(m.group(2))).strip()
            if line:
                return line
    dirs = package_dirs(_COMPILE_INTERNAL)
    for e in reversed(chain):
        frames = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
        for f in reversed(frames):
            if not is_internal(f.filename, dirs):
                return (f.line or linecache.getline(f.filename, f.lineno)).strip()
    return ""


def compile_error(exc: BaseException, name: str, arch: str,
                  binding: str = "") -> CompileError:
    """The CompileError for a failed compile of kernel `name`; `binding`
    says how the call's arguments reached the launcher's parameters."""
    cause = root_cause(exc)
    full = plain(str(exc)).strip()
    parts = [f"cutecall: kernel '{name}' failed to compile for {arch}: {cause}"]
    if binding:
        parts.append(f"  launcher parameters: {binding}")
    if full and full != cause:
        parts.append("CuTe DSL message:\n" + full)
    return CompileError("\n".join(parts), kernel=name, arch=arch,
                        root_cause=cause, dsl_message=full,
                        source_line=failing_source(exc))
