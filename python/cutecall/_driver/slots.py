"""What fills each of a launcher's parameters once a call is bound: the
:class:`SlotKind` and :class:`Slot` of each positional parameter, the
:class:`Binding` of one call (hashable: a static argument of the traced
call), and :func:`describe`, how a call was bound, for error messages.
``binding`` makes them. Pure Python, no CuTe DSL import.
"""

from __future__ import annotations

import dataclasses
import enum

from .signature import LauncherSignature


class SlotKind(enum.Enum):
    """What fills one positional parameter of the launcher."""

    STREAM = "stream"    # the caller's stream
    INPUT = "in"         # array argument ``index`` (Binding.arrays)
    OUTPUT = "out"       # kernel output ``index``
    SCALAR = "scalar"    # runtime scalar ``index`` (Binding.scalars)
    NONE = "none"        # an absent (None) argument, passed as None
    DEFAULT = "default"  # left to the parameter's default


@dataclasses.dataclass(frozen=True)
class Slot:
    kind: SlotKind
    index: int = 0

    def __str__(self):
        return self.kind.value if self.kind in (SlotKind.STREAM, SlotKind.NONE,
                                                SlotKind.DEFAULT) \
            else f"{self.kind.value} {self.index}"


STREAM_SLOT, NONE_SLOT, DEFAULT_SLOT = (Slot(SlotKind.STREAM), Slot(SlotKind.NONE),
                                        Slot(SlotKind.DEFAULT))


@dataclasses.dataclass(frozen=True)
class Binding:
    """How one call fills the launcher's positional parameters. Hashable: it
    is a static argument of the traced call (scalar values included, so each
    distinct value lowers its own custom call; the DSL compile is shared).

    ``slots[i]`` is the :class:`Slot` of positional parameter ``i``.
    ``arrays[k]`` is the call's positional index of array argument k (the
    ``INPUT`` slots' indices), ``absent`` those of its ``None`` arguments.
    """

    slots: tuple
    arrays: tuple
    scalars: tuple          # ScalarArg, in slot order
    keyword_scalars: tuple  # (param name, scalar index) for keyword-only
    absent: tuple = ()
    # Per INPUT argument its pytree (pytree.Node or Leaf: arrays, runtime
    # scalars, None, compile-time values), and per array leaf of the call,
    # in order, (INPUT index, key path within the argument).
    trees: tuple = ()
    leaves: tuple = ()
    # Per positional argument of the call, the Slot it fills (how a C++
    # launch object's leaves map to slots; not part of equality: a scalar by
    # keyword or by position binds the same).
    arg_slots: tuple = dataclasses.field(default=(), compare=False)
    # A call whose outputs are among its arguments (a launch object's): the
    # parameters the kernel writes, in output order (C++ marks their
    # tensors as outputs; nothing compiled depends on it).
    written: tuple = dataclasses.field(default=(), compare=False)

    def parameter_of(self, sig: LauncherSignature) -> dict:
        """{Slot: launcher parameter name} for inspected launchers."""
        if not sig.inspected:
            return {}
        return {slot: p.name for p, slot in zip(sig.params, self.slots)}


def describe(sig: LauncherSignature, binding: Binding) -> str:
    """How a call was bound, for error messages: ``x=input 0, o=output 0,
    eps=scalar Float32``."""
    if not sig.inspected:
        return ""
    names = {SlotKind.INPUT: "input", SlotKind.OUTPUT: "output",
             SlotKind.NONE: "None"}
    parts = []
    for p, slot in zip(sig.params, binding.slots):
        what = names.get(slot.kind, slot.kind.value)
        if slot.kind in (SlotKind.INPUT, SlotKind.OUTPUT):
            what += f" {slot.index}"
        elif slot.kind == SlotKind.SCALAR:
            what += f" {binding.scalars[slot.index].scalar_type}"
        parts.append(f"{p.name}={what}")
    return ", ".join(parts)
