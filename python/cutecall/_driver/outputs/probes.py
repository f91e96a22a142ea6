"""Which output placements a launcher has tried, and what each taught it
(issue 37's outputs found by what the kernel writes).

When a call names no outputs, ``binding.bind`` places them by a rule, or
among the parameters a trace saw the kernel write. A placement can turn out
wrong in three ways, each raised by ``pipeline.Launcher.specialize`` so that
the front binds again (``written_params.retrying``):

* it does not compile (:class:`written_params.PlacementFailed`): another
  placement is tried, at most ``MAX_PROBES``, with its dynamic and guided
  forms only while the rule's has failed; when none compiles, every
  placement again with every form (forms rejected once cost nothing);
* its trace writes no tensor at all (:class:`written_params.NothingWritten`):
  avoided while fewer than ``MAX_EMPTY_PROBES``, then the rule's placement
  compiles as it is;
* its trace only reads the outputs while it writes other parameters
  (:class:`written_params.OutputsElsewhere`) and no written parameter fits
  the call: avoided, at most ``MAX_READ_ONLY_PROBES``; when they come round
  again the evidence missed a write, and the rule's placement compiles
  unchecked.

A placement is the tuple of parameter positions of a binding's outputs, in
output order. :class:`PlacementProbes` keeps one launcher's record; the
launcher asks it what to check and what to avoid.
"""

from __future__ import annotations

from . import writes as written_params
from ..binding import Binding, SlotKind
from ..compile_error import CompileError


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


class PlacementProbes:
    """One launcher's placements tried and what each taught it."""

    def __init__(self):
        self.trusted: set = set()  # bindings with named outputs, or placed by writes
        self.avoid: set = set()  # placements the next bind must not use
        self.empty: set = set()  # traces that wrote nothing
        self.empty_done = False  # probed enough: compile as placed
        self.read_only_seen: set = set()  # traces that only read the outputs
        self.read_only_done = False
        self.failed: set = set()  # did not compile since the last that did
        self.climb_all = False  # no probe compiled: every form of every placement

    def trust(self, binding: Binding) -> None:
        """Named outputs, or outputs all where a trace saw writes: not
        checked again."""
        self.trusted.add(binding)

    def check(self, binding: Binding) -> bool:
        """Whether a compile of `binding` checks its outputs against what
        the trace writes."""
        return bool(outputs_at(binding)) and binding not in self.trusted \
            and not self.read_only_done

    def probe_empty(self, binding: Binding) -> bool:
        """Whether a trace that writes nothing stops the compile."""
        return not self.empty_done and has_absent(binding)

    def searched(self, binding: Binding) -> bool:
        """Whether the compile of `binding` climbs the searched static forms
        too: not for a probe made after the rule's placement failed."""
        return self.climb_all or not self.failed or binding in self.trusted

    def compiled(self) -> None:
        """A placement compiled: the failures before it are history."""
        self.failed.clear()
        self.climb_all = False

    def did_not_compile(self, name: str, binding: Binding, error: CompileError,
                        cause: CompileError, searched: bool) -> None:
        """Raises :class:`written_params.PlacementFailed` while another
        placement is worth trying (at most ``MAX_PROBES``; when those ran out
        with some climbed in part, once more with every form). Returns when
        the call's own error is due."""
        outs = outputs_at(binding)
        if not outs or binding in self.trusted:
            return
        if len(self.avoid) < written_params.MAX_PROBES:
            self.avoid.add(outs)
            self.failed.add(outs)
            raise written_params.PlacementFailed(name, outs, error) from cause
        self.avoid.clear()  # none compiled: the rule's again next time
        self.failed.clear()
        if not searched and not self.climb_all:
            self.climb_all = True
            raise written_params.PlacementFailed(name, outs, error) from cause
        self.climb_all = False

    def wrote_nothing(self, binding: Binding) -> None:
        """A trace of `binding` wrote no tensor: avoid its placement, until
        the placements run out or ``MAX_EMPTY_PROBES`` wrote nothing."""
        outs = outputs_at(binding)
        again = outs in self.empty  # the placements ran out: none writes
        self.empty.add(outs)
        self.avoid.add(outs)
        if again or len(self.empty) >= written_params.MAX_EMPTY_PROBES:
            self.avoid -= self.empty  # written nowhere: the rule's placement
            self.empty_done = True

    def read_only(self, binding: Binding) -> None:
        """A trace read the parameters of `binding`'s outputs only, while
        writing others: never there again. When the placements come round
        again or ``MAX_READ_ONLY_PROBES`` were read only, the evidence
        missed a write: the rule's placement compiles next, unchecked."""
        outs = outputs_at(binding)
        if outs in self.read_only_seen or \
                len(self.read_only_seen) >= written_params.MAX_READ_ONLY_PROBES:
            self.avoid -= self.read_only_seen
            self.read_only_done = True
        else:
            self.read_only_seen.add(outs)
            self.avoid.add(outs)
