"""Outputs found by what the kernel writes (issue 37).

A compile runs :func:`trace_hook` through ``cute.compile(...,
trace_finalize_hooks=)``: on the module the DSL traced, before its passes,
``mlir_writes.analyze`` tells which operands the kernel writes, and
:func:`param_writes` which launcher parameters those are. Inside
:func:`observing` (``pipeline.Launcher.specialize``) that is recorded, and a
binding whose outputs the rule placed is checked: when an output parameter
is written by nothing while other tensors are, the hook stops the compile
right after the trace -- the costly part never runs -- with
:class:`OutputsElsewhere`, and the front binds again (:func:`retrying`):
``Launcher.bind`` then places the outputs among the written parameters
(``placement.place_written``). A rule placement that does not even compile
(an input traced where the kernel writes) is passed over for the next ones
(:class:`PlacementFailed`, at most :data:`MAX_PROBES`), as is one whose
trace only reads its outputs when no written parameter fits the call (at
most :data:`MAX_READ_ONLY_PROBES`: an output is never bound to a parameter
the kernel only reads). torch's launch
objects move ``outputs=n`` to the written parameters after their first
compile (``learn_outputs``, which traces a kernel a cache held), so that
the custom op marks exactly those as mutated. No framework; the CuTe DSL
only inside the compile.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
from typing import Any, Callable

from . import compile_locate
from .binding import SlotKind
from .mlir_writes import Writes, analyze


@dataclasses.dataclass(frozen=True)
class ParamWrites:
    """What a trace writes, by launcher parameter: ``written`` and ``maybe``
    (names), ``unattributed`` as in :class:`Writes`; ``in_leaves``: those of
    them written only through a leaf (``epilogue_args.mAuxOut``), never
    whole -- containers, where a tensor output goes last
    (``placement.place_written``)."""

    written: frozenset
    maybe: frozenset
    unattributed: bool
    in_leaves: frozenset = frozenset()

    @property
    def candidates(self) -> frozenset:
        return self.written | self.maybe

    @property
    def empty(self) -> bool:
        """The trace writes no tensor at all, and says so (nothing
        unattributed)."""
        return not self.unattributed and not self.candidates

    def contradicts(self, outputs) -> bool:
        """A binding whose outputs include a parameter nothing writes, while
        other parameters are written: the outputs are elsewhere."""
        return not self.unattributed and bool(self.candidates - set(outputs)) and \
            any(o not in self.candidates for o in outputs)


class OutputsElsewhere(Exception):
    """A trace shows the kernel writing parameters other than the call's
    outputs. Raised by the compile before the DSL's passes; the front binds
    again with :attr:`writes` (``Launcher.bind`` reads them)."""

    def __init__(self, kernel: str, outputs, writes: ParamWrites):
        self.kernel, self.outputs, self.writes = kernel, tuple(outputs), writes
        super().__init__(
            f"cutecall: kernel '{kernel}' writes {', '.join(sorted(writes.candidates))}, "
            f"not {', '.join(map(str, outputs))}: binding its outputs again")


class NothingWritten(OutputsElsewhere):
    """A trace with the outputs where the rule placed them writes no tensor
    at all: the outputs would stay unwritten. QuACK's GEMM ``(mA, mB, mD,
    mC, ...)`` called ``(a, b, None, ...)`` puts the output at ``mC`` by
    the rule, ``mD`` None, and then writes nothing. The front tries the
    next placement (at most :data:`MAX_EMPTY_PROBES`, then the rule's)."""


def param_writes(spec, writes: Writes) -> ParamWrites | None:
    """`writes` (operand indices of `spec`) by parameter name: an operand is
    its parameter's (``x``, ``args['k']``, ``args.k``). None when the
    launcher's parameters are not known."""
    names = [n for n in spec.param_names if n]
    if not names or all(re.fullmatch(r"p\d+", n) for n in names):
        return None

    def param(operand: str) -> str | None:
        for n in sorted(names, key=len, reverse=True):
            if operand == n or operand.startswith((n + "[", n + ".")):
                return n
        return None

    def of(indices) -> frozenset:
        return frozenset(p for i in indices if i < len(spec.operands)
                         for p in [param(spec.operands[i].name)] if p)
    every = writes.written | writes.maybe
    whole = frozenset(spec.operands[i].name for i in every if i < len(spec.operands))
    return ParamWrites(of(writes.written), of(writes.maybe), writes.unattributed,
                       of(every) - whole)


def output_params(spec) -> list[str]:
    """The parameters `spec` binds the outputs to, in output order."""
    return [n for _, n in sorted((slot.index, n) for n, slot in zip(spec.param_names, spec.slots)
                                 if slot.kind == SlotKind.OUTPUT)]


@dataclasses.dataclass
class Observation:
    """One scope's compiles: what the last trace wrote (None: no trace ran,
    e.g. a cache hit), and the abort it raised."""

    check: bool
    writes: ParamWrites | None = None
    abort: OutputsElsewhere | None = None
    stop: bool = False  # stop every compile after its trace (learn_outputs)
    enabled: bool = True
    probe_empty: bool = False  # a trace writing nothing stops the compile


_current: contextvars.ContextVar = contextvars.ContextVar("cutecall_written_params",
                                                          default=None)


@contextlib.contextmanager
def observing(check: bool, enabled: bool = True, probe_empty: bool = False):
    """Compiles in this scope record what their trace writes; with `check`
    a trace that contradicts its binding's outputs stops the compile
    (:class:`OutputsElsewhere`), and with `probe_empty` too one that writes
    nothing at all (:class:`NothingWritten`). Not `enabled`: no hook runs
    (nothing to learn, nothing to check). Yields the :class:`Observation`."""
    obs = Observation(check and enabled, enabled=enabled,
                      probe_empty=check and enabled and probe_empty)
    token = _current.set(obs)
    try:
        yield obs
    finally:
        _current.reset(token)


def trace_hook(spec, name: str):
    """The ``trace_finalize_hooks`` entry for compiling `spec` (None outside
    :func:`observing`, or when the installed DSL has no such hook)."""
    obs = _current.get()
    if obs is None or not obs.enabled or not _dsl_has_hooks():
        return None

    def hook(owner, module, function_name):
        found = param_writes(spec, analyze(module, function_name))
        obs.writes = found
        outputs = output_params(spec)
        if obs.stop or (found is not None and obs.check and outputs
                        and found.contradicts(outputs)):
            obs.abort = OutputsElsewhere(name, outputs, found or
                                         ParamWrites(frozenset(), frozenset(), True))
            raise obs.abort
        if found is not None and obs.probe_empty and outputs and found.empty:
            obs.abort = NothingWritten(name, outputs, found)
            raise obs.abort
    return hook


def _dsl_has_hooks() -> bool:
    """Whether the installed DSL takes ``cute.compile(...,
    trace_finalize_hooks=)`` (4.8 does)."""
    try:
        from cutlass.base_dsl.dsl import BaseDSL
    except ImportError:
        return False
    return hasattr(BaseDSL, "trace_finalize_hooks")


def reraise(exc: BaseException) -> None:
    """In a compile's error path: raises the :class:`OutputsElsewhere` that
    stopped it (the DSL wraps what a hook raises)."""
    obs = _current.get()
    if obs is not None and obs.abort is not None:
        raise obs.abort from None


class PlacementFailed(OutputsElsewhere):
    """The kernel did not compile with its outputs where the rule placed
    them: the front binds again, passing that placement over (a kernel
    traced with an input where it writes may fail before its writes are
    seen). :attr:`error` is the compile's error."""

    def __init__(self, kernel: str, outputs, error: BaseException):
        self.error = error
        super().__init__(kernel, outputs, ParamWrites(frozenset(), frozenset(), True))


# Placements a front tries after the rule's failed to compile, best-ranked
# first. cuDNN's sm90 block-sparse attention, (q, k, v, o, lse, indices,
# counts, sizes), writes where the rule ranks the 7th placement; a probe
# whose trace fails costs that trace (and its static forms) alone.
MAX_PROBES = 8
# Placements a front tries while each one's trace writes nothing (the rule's
# counts): after that the rule's placement is compiled as it is.
MAX_EMPTY_PROBES = 3
# Placements passed over because their trace read the outputs only while
# writing other parameters (QuACK's symmetric GEMM from JAX: D at mC, which
# it reads); then the rule's placement compiles unchecked.
MAX_READ_ONLY_PROBES = 4
# Binds a front tries for one call: the probes twice (their dynamic and
# guided forms, then every form: ``pipeline.Launcher``), and a few more.
MAX_ROUNDS = 2 * MAX_PROBES + 4


def retrying(attempt: Callable[[], Any]) -> Any:
    """``attempt()`` (a front's bind and compile), again while its compile
    finds the outputs elsewhere (:class:`OutputsElsewhere`: the launcher has
    learned where the kernel writes, and binds there) or fails with them
    where the rule put them (:class:`PlacementFailed`: the launcher tries
    the next placement, at most :data:`MAX_PROBES`, twice: see
    :data:`MAX_ROUNDS`), or writes nothing
    there (:class:`NothingWritten`: the next placement, at most
    :data:`MAX_EMPTY_PROBES`, not counted among the others). When no
    placement compiles, the rule's error is raised."""
    first, tried, kernel, rounds, empty = None, 0, "", 0, 0
    while rounds < MAX_ROUNDS:
        try:
            return attempt()
        except NothingWritten:
            empty += 1
            rounds += empty > MAX_EMPTY_PROBES
        except PlacementFailed as e:
            first, tried, kernel, rounds = first or e.error, tried + 1, e.kernel, rounds + 1
        except OutputsElsewhere:
            rounds += 1
        except Exception:
            if first is not None:  # a probe's own error: the rule's is clearer
                raise _hinted(first, kernel, tried) from None
            raise
    if first is None:
        raise RuntimeError("cutecall: no binding compiled")
    raise _hinted(first, kernel, tried)


def _hinted(error: BaseException, kernel: str, tried: int) -> BaseException:
    """The rule's compile error, noting that other placements failed too
    (a note where Python has them, 3.11+), with the place of its invalid
    IR found (``compile_locate``)."""
    error = compile_locate.located(error)
    if hasattr(error, "add_note"):
        error.add_note(
            f"cutecall: {tried} placement(s) of the outputs of '{kernel}' were tried and "
            "none compiled; if the outputs are not where the rule puts them, name "
            "them: output_params=(...) in JAX, outputs=(...) in torch.")
    return error
