"""Climbing the static fallback's forms (``fallback``): :func:`climb`
compiles the first form the DSL accepts, warns once per kernel naming
exactly the dims it compiled in and the front's way of asking for them (a
function the front passes: how its users write it), and records rejections
for later processes. :func:`climb_traces` climbs the same forms with a
trace that stops before the DSL's passes (a question: ``outputs``). No
framework; the CuTe DSL only through ``store.memory``.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Any, Callable, Iterator, Sequence

from .compile_error import CompileError, StaticFallbackWarning
from .fallback import ENV, enabled, guided, search, summary
from .log import logger
from .operand import EVERYTHING
from .store import memory, records
from .user_frames import user_stacklevel

# A store of one element type into a tensor of another: no static extent
# changes an element type, so no further form is tried (an output bound
# where the kernel reads an int32 index: cuDNN's block-sparse attention).
_ELEMENT_TYPE = re.compile(r"(?i)type mismatch, store .+ to ")
# The DSL asking for a value known at trace time: the searched forms are
# tried even for a placement probe (Liger's JSD reads const_expr(N % tile);
# a kernel asserts on a stride: ``assert x.stride[0] == 64``).
_NEEDS_STATIC = re.compile(r"(const_expr\(\)|assert)` requires a value known|dynamic layout")


def climb(build: Callable, operands: Sequence, start: Sequence[int], *, name: str,
          options: str, arch: str, fallback: bool | None,
          explicit: Callable[[tuple], str]) -> tuple:
    """Compiles the first form of a call the DSL accepts: ``build(start)``
    (`start`: per operand the masks to compile in beyond the front's own --
    none, or what worked last time), then guided and searched forms
    (``fallback``). `build(masks)` returns a :class:`KernelSpec`; `operands`
    have ``name`` and ``shape``. Returns (kernel, spec, masks, forms tried
    before it).

    A form other than `start` warns once per kernel with
    :class:`StaticFallbackWarning`, naming its dims and ``explicit(masks)``;
    with ``fallback=False`` (or ``$CUTECALL_STATIC_FALLBACK=0``) the first
    form's ``CompileError`` is raised instead. Rejected keys are remembered
    for the process and recorded in the artifact store: each fails once per
    user and version, not per call or process. A store of the wrong element
    type stops any climb: no static extent fixes it.
    """
    c = _Climb(build, operands, tuple(start), name, options, arch, enabled(fallback))
    seen = set()
    for tried, masks in enumerate(c.forms()):
        spec = build(masks)
        if spec.key in seen:
            continue
        seen.add(spec.key)
        compiled = c.attempt(spec, masks)
        if compiled is not None:
            c.warn(masks, explicit)
            return compiled, spec, masks, tried
    return c.fail()


@dataclasses.dataclass(frozen=True)
class Traced:
    """What :func:`climb_traces` found: ``trace(spec)`` of the first form
    whose trace passed, that form's spec and masks; or, when none did, the
    first form's error and the last one's."""

    value: Any = None
    spec: Any = None
    masks: tuple = ()
    error: CompileError | None = None
    last: CompileError | None = None


def climb_traces(build: Callable, operands: Sequence, start: Sequence[int], *,
                 name: str, options: str, arch: str, fallback: bool | None,
                 trace: Callable, searched: bool = True) -> Traced:
    """The forms of :func:`climb`, each traced instead of compiled (`trace`
    raises ``CompileError`` for a form whose trace fails): a
    :class:`Traced`. A form whose trace fails is remembered as rejected, as
    a failed compile is (its compile is never tried); one remembered so is
    not traced. Warns nothing (the compile does).

    `searched=False` stops after the guided forms unless the DSL asked for
    a value known at trace time: a placement tried after the rule's failed
    (``outputs``), whose outputs in the wrong place fail whatever extents
    are static."""
    c = _Climb(build, operands, tuple(start), name, options, arch, enabled(fallback),
               searched)
    seen = set()
    for masks in c.forms():
        spec = build(masks)
        if spec.key in seen:
            continue
        seen.add(spec.key)
        traced = c.attempt_trace(spec, masks, trace)
        if traced is not None:
            return Traced(traced[0], spec, masks)
        c.tried = c.last or c.tried
    first = c.first or c.tried or rejected_error(name, arch, c.cause)
    return Traced(error=c.noted(first) if searched else first, last=c.tried or first)


def rejected_error(name: str, arch: str, cause: str, source: str = "") -> CompileError:
    """The error of a form the DSL rejected before (in this process, or as
    another recorded): its cause on a first line like a compile's."""
    error = CompileError("", kernel=name, arch=arch, root_cause=cause, source_line=source)
    error.args = (error.head() + cause,)
    return error


class _Climb:
    """One climb's state: the first and the latest rejection, and why."""

    def __init__(self, build, operands, start: tuple, name: str, options: str,
                 arch: str, allowed: bool, searched: bool = True):
        self.build, self.start, self.allowed = build, start, allowed
        self.searched = searched
        self.name, self.options, self.arch = name, options, arch
        self.names = [op.name for op in operands]
        self.shapes = [tuple(op.shape) for op in operands]
        self.ranks = [len(s) for s in self.shapes]
        self.first: CompileError | None = None  # the first form's failure
        self.last: CompileError | None = None   # the latest, to guide the next
        self.cause = "rejected earlier in the process"
        self.warning = ""                       # what to warn, once per kernel
        self.start_compiled = False             # the start form compiled here
        self.tried: CompileError | None = None  # the last form's failure

    def forms(self) -> Iterator[tuple]:
        """`start`, then (if allowed) guided forms while the failures name
        new dims, else the next searched form."""
        yield self.start
        if not self.allowed:
            return
        searched = iter(search(self.shapes))
        current = self.start
        while True:
            error, self.last = self.last, None
            cause = (getattr(error, "root_cause", None) or "") if error else ""
            if _ELEMENT_TYPE.search(cause):
                return
            if error is not None and not self.searched and not _NEEDS_STATIC.search(cause):
                searched = iter(())
            step = tuple(a | b for a, b in
                         zip(current, guided(error, self.names, self.ranks))) \
                if error is not None else current
            if step == current:  # no guidance: the next searched form
                step = next((tuple(a | b for a, b in zip(self.start, m))
                             for m in searched), None)
                if step is None:
                    return
            current = step
            yield step

    def attempt(self, spec, masks: tuple):
        """The compiled kernel of one form, or None when the DSL rejects it
        (now, earlier in the process, or in an earlier process)."""
        cache, key = memory, spec.key
        last_form = all(m == EVERYTHING for m in masks)
        with cache.lock:
            cached = cache.cached(key)
            stored = None if cached or cache.is_rejected(key) or last_form \
                or not self.allowed else records.rejection(key, self.arch)
            if stored is not None:
                self.cause = f"{stored[0]} (recorded by an earlier process)"
            if cache.is_rejected(key) or stored is not None:
                source = stored[1] if stored else cache.rejected_source(key)
                if stored is None and cache.rejected_cause(key):  # the climb stops
                    self.cause = f"{cache.rejected_cause(key)} (rejected earlier in the process)"
                cache.remember_rejection(key, self.name, source, stored[0] if stored else "")
                self.last = rejected_error(self.name, self.arch, self.cause, source)
                return None
            if masks == self.start:
                self.start_compiled = True
            try:
                kernel = cache.get_locked(spec, self.name, self.options, self.arch)
            except CompileError as e:
                self._rejected(key, e, last_form)
                return None
            self._accepted(masks, cached)
        return kernel

    def attempt_trace(self, spec, masks: tuple, trace: Callable) -> tuple | None:
        """``(trace(spec),)`` of one form, or None when its trace fails (now)
        or its compile was rejected (in this process, or recorded)."""
        key, last_form = spec.key, all(m == EVERYTHING for m in masks)
        with memory.lock:
            stored = None if memory.is_rejected(key) or last_form or not self.allowed \
                else records.rejection(key, self.arch)
            if memory.is_rejected(key) or stored is not None:
                self.cause = memory.rejected_cause(key) or (stored[0] if stored else self.cause)
                source = stored[1] if stored else memory.rejected_source(key)
                self.last = rejected_error(self.name, self.arch, self.cause, source)
                return None
            try:
                return (trace(spec),)
            except CompileError as e:
                self._rejected(key, e, last_form)
                return None

    def _rejected(self, key, e: CompileError, last_form: bool) -> None:
        logger.info("kernel '%s' rejected a form for %s: %s", self.name, self.arch,
                    e.root_cause)
        self.first = self.first or e
        self.last = e
        memory.remember_rejection(key, self.name, e.source_line, e.root_cause)
        if self.allowed and not last_form:
            records.record_rejection(key, self.name, self.arch, e.root_cause,
                                     e.source_line)

    def _accepted(self, masks: tuple, cached) -> None:
        """Counts and logs a climbed form (under the cache lock) and decides
        whether this kernel's one warning is due."""
        if masks == self.start:
            return
        cache = memory
        what = summary([m & ~s for m, s in zip(masks, self.start)],
                       self.names, self.shapes)
        cause = self.first.root_cause if self.first else self.cause
        if not cached:
            cache.count_fallback()
            logger.info("kernel '%s': static fallback, compiled with %s (%s)",
                        self.name, what, cause)
        if self.name not in cache.warned:
            cache.warned.add(self.name)
            self.warning = (
                f"cutecall: kernel '{self.name}' does not compile with dynamic "
                f"layouts ({cause}); compiled with {what}, as its authors' launch "
                f"path or NVIDIA's cutlass_call would.")

    def warn(self, masks: tuple, explicit: Callable[[tuple], str]) -> None:
        """The one StaticFallbackWarning of this kernel, outside the lock."""
        if self.warning:
            warnings.warn(
                f"{self.warning} To ask for this explicitly: {explicit(masks)}. "
                f"To make it an error: static_fallback=False or {ENV}=0.",
                StaticFallbackWarning, stacklevel=user_stacklevel())

    def noted(self, first: CompileError) -> CompileError:
        """The first form's error, noting that the static forms failed too
        (when the fallback may climb)."""
        if not self.allowed:
            return first
        noted = first.with_message(
            f"{first}\n(no static form compiled either; the fully static one "
            "is tried last)", kernel=self.name, arch=self.arch)
        noted.__cause__ = first
        return noted

    def fail(self) -> tuple:
        """No form compiled: the start form's error (with a note when static
        forms were tried too), remembered for the same call. A start form
        rejected earlier (in the process, or recorded by another) is
        compiled again, so the error is the DSL's own about the call as
        made, not a static form's."""
        cache = memory
        if not self.start_compiled:
            spec = self.build(self.start)
            with cache.lock:
                earlier = cache.failure(spec.key)
                if earlier is not None:  # the same call failed: no compile again
                    raise earlier
                cache.forget_rejection(spec.key)
                try:
                    kernel = cache.get_locked(spec, self.name, self.options, self.arch)
                except CompileError as e:
                    if self.first is None:  # only the start form was tried
                        raise
                    cache.remember_rejection(spec.key, self.name, e.source_line, e.root_cause)
                    self.first = e
                else:
                    return kernel, spec, self.start, 0
        first = self.noted(self.first)
        with cache.lock:
            cache.remember_failure(self.build(self.start).key, first)
        raise first
