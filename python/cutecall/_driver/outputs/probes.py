"""The placements one placement question tried, and what each taught.

When a call names no outputs, ``stage.place`` binds them by the rule, or
among the parameters a trace saw the kernel write, and traces the binding.
A placement can turn out wrong in three ways, each recorded here, and the
next bind passes it over (:attr:`Probes.avoid`):

* its trace fails (:meth:`Probes.did_not_trace`): the rule's placement is
  traced in every static form the compile would climb, then the placement
  sharing none of its outputs that ranks first -- when that one fails at
  the same source line, the same way, the failure is the call's, not the
  placement's, and the rule's error is raised (a kernel that asserts on a
  stride before any write fails so wherever its outputs sit); then others,
  best-ranked first, their dynamic and guided forms only, at most
  :data:`MAX_PROBES`;
* its trace writes no tensor at all (:meth:`Probes.wrote_nothing`): passed
  over while fewer than :data:`MAX_EMPTY_PROBES` did, then the rule's
  placement stands;
* its trace only reads the outputs while it writes other parameters
  (:meth:`Probes.read_only`) and no written parameter fits the call:
  passed over, at most :data:`MAX_READ_ONLY_PROBES`; when they come round
  again the evidence missed a write, and the rule's placement stands.

A placement is the tuple of parameter positions of a binding's outputs, in
output order. No framework, no CuTe DSL.
"""

from __future__ import annotations

from ..slots import Binding, SlotKind
from ..compile_error import CompileError

# Placements traced after the rule's failed to trace. cuDNN's sm90
# block-sparse attention, (q, k, v, o, lse, indices, counts, sizes), writes
# where the rule ranks the 7th placement.
MAX_PROBES = 8
# Placements traced while each one's trace writes nothing (the rule's
# counts): after that the rule's placement stands.
MAX_EMPTY_PROBES = 3
# Placements passed over because their trace read the outputs only while
# writing other parameters (QuACK's symmetric GEMM from JAX: D at mC, which
# it reads); then the rule's placement stands.
MAX_READ_ONLY_PROBES = 4
# Traces one question runs at most: every probe above, and a few more.
MAX_ROUNDS = MAX_PROBES + MAX_EMPTY_PROBES + MAX_READ_ONLY_PROBES + 4


def outputs_at(binding: Binding) -> tuple:
    """The parameter positions of a binding's outputs, in output order."""
    return tuple(i for _, i in sorted((slot.index, i) for i, slot in enumerate(binding.slots)
                                      if slot.kind == SlotKind.OUTPUT))


def has_absent(binding: Binding) -> bool:
    """A parameter left None or to its default: only there can another
    placement put an output that a trace writing nothing would write
    (QuACK's GEMM called with C None). A kernel given every array that
    writes nothing is compiled as placed, once."""
    return any(slot.kind in (SlotKind.NONE, SlotKind.DEFAULT) for slot in binding.slots)


def _where(error: CompileError) -> tuple:
    """How a trace failed: its cause and the source line it failed at."""
    return (getattr(error, "root_cause", "") or str(error),
            getattr(error, "source_line", "") or "")


class Probes:
    """One question's placements tried and what each taught."""

    def __init__(self):
        self.avoid: set = set()  # placements the next bind must not use
        self.empty: set = set()  # traces that wrote nothing
        self.empty_done = False  # probed enough: the rule's placement stands
        self.read_only_seen: set = set()  # traces that only read the outputs
        self.read_only_done = False
        self.failed: dict = {}  # placement -> its trace's CompileError, in order
        self.last: dict = {}  # placement -> its last form's CompileError
        self.rule = None  # the rule's placement, when its trace failed

    @property
    def first_error(self) -> CompileError | None:
        """The rule's trace error (the first placement traced)."""
        return next(iter(self.failed.values()), None)

    @property
    def apart_from(self) -> tuple:
        """The placement the next one keeps apart from: the rule's, while
        no placement apart from it was traced."""
        if self.rule is None or len(self.failed) != 1:
            return ()
        return self.rule

    def searched(self, outs: tuple) -> bool:
        """Whether a trace of placement `outs` climbs the searched static
        forms too: the first placement traced (the rule's), as its compile
        would; not one tried after it failed."""
        return not self.failed or outs == self.rule

    def check_empty(self, binding: Binding) -> bool:
        """Whether a trace that writes nothing moves the outputs on."""
        return not self.empty_done and has_absent(binding)

    def did_not_trace(self, outs: tuple, error: CompileError, last: CompileError) -> bool:
        """Records that placement `outs` failed to trace (`error`: its first
        form's failure, `last`: its last form's); whether another is worth
        tracing (module docstring)."""
        self.failed[outs] = error
        self.last[outs] = last
        self.avoid.add(outs)
        if self.rule is None:
            self.rule = outs
            return True
        if len(self.failed) == 2 and not set(outs) & set(self.rule) and \
                _where(last) == _where(self.last[self.rule]):
            return False  # fails as the rule's, outputs elsewhere: the call's error
        return len(self.failed) <= MAX_PROBES

    def wrote_nothing(self, outs: tuple) -> None:
        """A trace of placement `outs` wrote no tensor: passed over, until
        the placements run out or ``MAX_EMPTY_PROBES`` wrote nothing."""
        again = outs in self.empty  # the placements ran out: none writes
        self.empty.add(outs)
        self.avoid.add(outs)
        if again or len(self.empty) >= MAX_EMPTY_PROBES:
            self.avoid -= self.empty  # written nowhere: the rule's placement
            self.empty_done = True

    def read_only(self, outs: tuple) -> None:
        """A trace read placement `outs`' parameters only, while writing
        others: never there again. When the placements come round again or
        ``MAX_READ_ONLY_PROBES`` were read only, the evidence missed a
        write: the rule's placement stands, unchecked."""
        if outs in self.read_only_seen or len(self.read_only_seen) >= MAX_READ_ONLY_PROBES:
            self.avoid -= self.read_only_seen
            self.read_only_done = True
        else:
            self.read_only_seen.add(outs)
            self.avoid.add(outs)
