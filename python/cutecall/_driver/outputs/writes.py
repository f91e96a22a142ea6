"""What a traced kernel writes, by launcher parameter.

A trace (``compiler.trace_kernel``: the DSL's passes never run) hands its
module to :func:`reader`'s function: ``mlir_writes.analyze`` tells which
operands the kernel writes, and :func:`param_writes` which launcher
parameters those are (:class:`ParamWrites`). The stage (``stage``) places
a call's outputs by them. No framework; no CuTe DSL.
"""

from __future__ import annotations

import dataclasses
import re

from ..slots import SlotKind
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

    def unaccounted(self, outputs) -> list:
        """The outputs no write is known to reach while the kernel stores
        through an address the analysis lost (inline PTX): where they are
        written cannot be told."""
        return [o for o in outputs if o not in self.candidates] if self.unattributed else []


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


def reader(spec):
    """What ``compiler.trace_kernel`` reads of `spec`'s traced module: its
    :class:`ParamWrites` (None when the parameters are not known)."""
    def read(module, function_name) -> ParamWrites | None:
        return param_writes(spec, analyze(module, function_name))
    return read


def output_params(spec) -> list[str]:
    """The parameters `spec` binds the outputs to, in output order."""
    return [n for _, n in sorted((slot.index, n) for n, slot in zip(spec.param_names, spec.slots)
                                 if slot.kind == SlotKind.OUTPUT)]
