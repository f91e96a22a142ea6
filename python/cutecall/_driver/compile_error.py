"""Compile failures a user can read: the DSL's root cause on the first line.

The CuTe DSL reports a failed compile as a multi-line, colored diagnostic
whose first line is empty and whose cause (an MLIR verifier message, an
exception raised inside the user's launcher) sits further down or in the
exception chain. :class:`CompileError` puts that cause on its first line,
with the kernel's name and the target arch; the DSL's full message follows
and stays available as ``dsl_message``. Here: the error, its root cause
(:func:`root_cause`) and how it is worded (:func:`compile_error`); where it
happened in the user's code is ``user_frames``'.
"""

from __future__ import annotations

import os
import re

from .user_frames import exception_chain, failing_source, plain, raised_at, user_location

# An MLIR diagnostic line: "error: <location>: <message>"; locations are
# "unknown", "loc(...)" or "file:line:col".
_MLIR_ERROR = re.compile(
    r"^\s*error:\s*(?:unknown:\s*|loc\([^)]*\):\s*|[^\s:]+:\d+:\d+:\s*)?(.*)$")


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
    chain = exception_chain(exc)
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
        return first + raised_at(root)
    text = next((ln.strip() for ln in plain(str(root)).splitlines() if ln.strip()),
                "")
    return f"{type(root).__name__}: {text}{raised_at(root)}"


# The DSL names the function it traces, cutecall's generated entry point.
_ENTRY = re.compile(r" in `cutecall_entry`")


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
