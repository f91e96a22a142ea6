"""Binding one call to a launcher's parameters: the call's positional
arguments fill the parameters that are neither the stream nor outputs, in
the launcher's order, wherever the outputs sit (``placement``); keyword
arguments carry runtime scalars; ``None`` is an absent optional. The result,
a :class:`Binding`, names what fills each parameter with a typed
:class:`Slot`. Pure Python, no CuTe DSL import.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Callable, Mapping, Sequence

from . import pytree
from .outputs.placement import (NO_EVIDENCE, VALUE, Evidence, arg_kind, named_outputs,
                                place_outputs, place_written, placements, probe_rank,
                                written_params)
from .signature import (CONSTEXPR, SCALAR, STREAM, TENSOR, LauncherSignature, Param,
                        concrete_scalar, encode_scalar, infer_scalar_type,
                        is_scalar_value, python_value)


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


def default_is_array(x) -> bool:
    """An array to the driver: anything with a shape and a dtype that is not
    a scalar (JAX arrays, tracers, ShapeDtypeStructs, NumPy arrays, torch
    tensors). Fronts may pass their own test."""
    return hasattr(x, "shape") and hasattr(x, "dtype") and not is_scalar_value(x) \
        and pytree.dsl_scalar_type(x) is None


def check_argument(a, what: str, is_array: Callable[[Any], bool] = default_is_array) -> None:
    """A call's positional argument is an array, a pytree (a container), a
    scalar or None; compile-time values are given when the launcher is bound
    (constexprs), or sit inside a pytree. Raises a TypeError naming `what`."""
    if a is None or is_scalar_value(a) or pytree.dsl_scalar_type(a) or is_array(a) \
            or pytree.is_container(a):
        return
    raise TypeError(f"cutecall: {what} must be an array, a pytree of arrays, a scalar "
                    f"or None, got {type(a).__name__}: {a!r} (compile-time values are "
                    "keyword arguments when the launcher is bound, or fields of a "
                    "pytree)")


def check_arguments(sig: LauncherSignature, args: Sequence, constexpr_names, name: str,
                    is_array: Callable[[Any], bool] = default_is_array) -> None:
    """:func:`check_argument` for each positional argument of a call of
    launcher `name`; a compile-time value passes where a ``Constexpr``
    parameter not given to the launcher may take it."""
    values = any(p.kind == CONSTEXPR and not p.keyword_only and p.name not in constexpr_names
                 for p in sig.params)
    for i, a in enumerate(args):
        if not (values and arg_kind(a) == VALUE):
            check_argument(a, f"argument {i} of '{name}'", is_array)


@dataclasses.dataclass(frozen=True)
class Call:
    """One call as a front hands it to the driver to bind: its positional
    arguments and keyword runtime scalars; how many outputs it has and
    whether they are among its arguments (`outputs_in_call`: a launch
    object's, which the caller passes) or not (JAX's, which the call
    returns); the launcher's operand order; the front's reading of its
    values: `scalar_value(x, what)` reads a runtime scalar as a host value
    (it raises, naming `what`, for values that have none, e.g. traced
    ones), `is_array` says what its arrays are."""

    args: tuple
    kwargs: Mapping = dataclasses.field(default_factory=dict)
    num_outputs: int = 0
    outputs_in_call: bool = False
    order: str = "inputs_first"
    scalar_value: Callable[[Any, str], Any] = concrete_scalar
    is_array: Callable[[Any], bool] = default_is_array


def bind(sig: LauncherSignature, call: Call, constexpr_names, *,
         output_names: Sequence[str] | None = None,
         evidence: Evidence = NO_EVIDENCE) -> tuple[Binding, list]:
    """Binds a call's arguments; returns the binding and the values of the
    array leaves (in ``Binding.leaves`` order). `output_names` names the
    output parameters (in output order) instead of placing them; else the
    rule places them, or the `evidence` of a placement question (the
    parameters a trace saw written, placements to pass over:
    :func:`output_positions`). A call whose outputs are among its
    arguments binds them as inputs, and :attr:`Binding.written` names them
    (``placement.written_params``).

    A positional argument that is neither None nor a scalar is a pytree
    (``pytree``): an array, a container of arrays, runtime scalars, None and
    compile-time values, or one compile-time value. ``cutlass.Constexpr``
    parameters the launcher was not given take the call's positional values
    where its authors pass them (first, after the stream, between tensors:
    ``cute.compile(bmm, gemm_op, a, b, c, stream, epilogue)``) -- objects,
    callables and numbers, compiled in -- when the call does not fit the
    other parameters alone."""
    if not sig.inspected:  # (stream, *inputs, *outputs, **constexprs)
        return _Builder(sig, call.scalar_value, call.is_array).bind_uninspected(
            call.args, call.kwargs, 0 if call.outputs_in_call else call.num_outputs)
    by_name = _check_keywords(sig, call.kwargs, constexpr_names)
    closed = [i for i, p in enumerate(sig.params)
              if p.kind in (TENSOR, SCALAR) and p.name not in call.kwargs
              and p.name not in constexpr_names]
    with_constexprs = [i for i, p in enumerate(sig.params)
                       if (i in closed or p.kind == CONSTEXPR and not p.keyword_only)
                       and p.name not in call.kwargs and p.name not in constexpr_names]
    try:
        return _bind_to(sig, call, by_name, constexpr_names, closed, closed,
                        output_names, evidence)
    except TypeError as error:
        if with_constexprs == closed:
            raise
        first = error
    try:
        return _bind_to(sig, call, by_name, constexpr_names, closed, with_constexprs,
                        output_names, evidence)
    except TypeError as error:
        values = any(arg_kind(a) == VALUE for a in call.args)
        raise error if values or len(call.args) > len(closed) else first from None


def _bind_to(sig: LauncherSignature, call: Call, by_name: dict, constexpr_names,
             closed: list, open_params: list, output_names, evidence: Evidence
             ) -> tuple[Binding, list]:
    """`call` bound with its positional arguments filling `open_params`
    (parameter indices, in order) around the outputs; `closed`: those of
    them that are no constexpr (where outputs sit)."""
    args, kwargs = call.args, call.kwargs
    num_outputs = 0 if call.outputs_in_call else call.num_outputs
    b = _Builder(sig, call.scalar_value, call.is_array)
    if call.outputs_in_call and call.num_outputs:
        among = (evidence.written, evidence.in_leaves) if evidence.written else ()
        b.written = tuple(output_names) if output_names is not None else tuple(
            written_params(sig, closed, call.num_outputs, sig.name, *among))
        output_names = None
    out_pos = output_positions(sig, open_params, args, num_outputs, call.order,
                               output_names, evidence)
    in_pos = [i for i in open_params if i not in out_pos][:len(args)]

    slots: list = [STREAM_SLOT if p.kind == STREAM else None for p in sig.params]
    for j, i in enumerate(out_pos):
        slots[i] = Slot(SlotKind.OUTPUT, j)
    for k, i in enumerate(in_pos):
        slots[i] = b.positional(k, sig.params[i], args[k])
    keyword_scalars = []
    for k, v in kwargs.items():
        p = by_name[k]
        s = b.keyword(p, v)
        if p.keyword_only:
            keyword_scalars.append((k, s.index))
        else:
            slots[sig.params.index(p)] = s
    _fill_defaults(sig, slots, kwargs, constexpr_names)
    return b.done(slots, keyword_scalars, [slots[i] for i in in_pos[:len(args)]])


class _Builder:
    """What one call's binding collects: runtime scalars, argument trees,
    array leaves (their paths and values), array and absent arguments."""

    def __init__(self, sig: LauncherSignature, scalar_value, is_array):
        self.sig, self.scalar_value, self.is_array = sig, scalar_value, is_array
        self.scalars: list = []  # ScalarArg
        self.trees, self.paths, self.values = [], [], []
        self.arrays, self.absent = [], []
        self.written: tuple = ()

    def tree(self, k: int, a, name: str, annotation=None) -> Slot:
        """Argument `k`, a pytree, as the next INPUT slot (a plain tuple
        where `annotation` names a NamedTuple becomes one)."""
        def on_scalar(path, value, scalar_type):
            what = f"{name}{pytree.keystr(path)}"
            v = self.scalar_value(value, f"runtime scalar {what!r} ({scalar_type})")
            self.scalars.append(encode_scalar(what, scalar_type, v))
            return len(self.scalars) - 1
        node, found = pytree.flatten(a, self.is_array, on_scalar, annotation=annotation)
        self.paths.extend((len(self.trees), p) for p, _ in found)
        self.values.extend(v for _, v in found)
        self.trees.append(node)
        self.arrays.append(k)
        return Slot(SlotKind.INPUT, len(self.trees) - 1)

    def scalar(self, name: str, scalar_type, value) -> Slot:
        self.scalars.append(encode_scalar(name, scalar_type, value))
        return Slot(SlotKind.SCALAR, len(self.scalars) - 1)

    def param_scalar(self, p: Param, value, what: str) -> Slot:
        """A runtime scalar for parameter `p`, typed by its annotation, the
        DSL scalar's own type or the value."""
        st = pytree.dsl_scalar_type(value)
        v = self.scalar_value(value.value if st else value, what)
        return self.scalar(p.name, p.scalar_type or st or infer_scalar_type(v), v)

    def positional(self, k: int, p: Param, a) -> Slot:
        """Positional argument `k` filling parameter `p`."""
        what = f"argument {p.name!r} of '{self.sig.name}'"
        if p.kind == CONSTEXPR:  # compiled in, whatever it is
            self.trees.append(pytree.Leaf(pytree.CONST, a))
            self.arrays.append(k)
            return Slot(SlotKind.INPUT, len(self.trees) - 1)
        if a is None:
            self.absent.append(k)
            return NONE_SLOT
        if p.kind == SCALAR or is_scalar_value(a) or pytree.dsl_scalar_type(a):
            return self.param_scalar(p, a, what)
        check_argument(a, what, self.is_array)
        return self.tree(k, a, p.name, p.container)

    def keyword(self, p: Param, v) -> Slot:
        """A call-time keyword argument: a runtime scalar for `p`."""
        k, name = p.name, self.sig.name
        if p.kind == TENSOR and not (is_scalar_value(v) or pytree.dsl_scalar_type(v)):
            raise TypeError(f"cutecall: array argument {k!r} of '{name}' "
                            "must be passed positionally (keywords carry "
                            "runtime scalars only)")
        if p.kind == TENSOR and p.annotated:
            raise TypeError(f"cutecall: {k}={v!r}: parameter {k!r} of "
                            f"'{name}' is annotated as a tensor; a scalar "
                            "cannot fill it")
        return self.param_scalar(p, v, f"argument {k!r} of '{name}'")

    def bind_uninspected(self, args, kwargs, num_outputs: int) -> tuple[Binding, list]:
        """A launcher taking ``*args``: stream, the arguments, the outputs."""
        if kwargs:
            raise TypeError(f"cutecall: launcher '{self.sig.name}' takes *args, so "
                            f"call-time keyword arguments {sorted(kwargs)} cannot "
                            "be bound; pass them positionally")
        slots = [STREAM_SLOT]
        for i, a in enumerate(args):
            if a is None:
                slots.append(NONE_SLOT)
                self.absent.append(i)
            elif is_scalar_value(a) or pytree.dsl_scalar_type(a):
                st = pytree.dsl_scalar_type(a)
                v = a.value if st else python_value(a, f"argument {i}")
                slots.append(self.scalar(f"arg{i}", st or infer_scalar_type(v), v))
            else:
                check_argument(a, f"argument {i} of '{self.sig.name}'", self.is_array)
                slots.append(self.tree(i, a, f"arg{i}"))
        arg_slots = slots[1:]
        slots += [Slot(SlotKind.OUTPUT, j) for j in range(num_outputs)]
        return self.done(slots, (), arg_slots)

    def done(self, slots, keyword_scalars, arg_slots) -> tuple[Binding, list]:
        return Binding(tuple(slots), tuple(self.arrays), tuple(self.scalars),
                       tuple(keyword_scalars), tuple(self.absent), tuple(self.trees),
                       tuple(self.paths), tuple(arg_slots), self.written), self.values


def output_positions(sig: LauncherSignature, open_params: Sequence[int],
                     args: Sequence[Any], num_outputs: int, order: str,
                     output_names: Sequence[str] | None = None,
                     evidence: Evidence = NO_EVIDENCE) -> tuple[int, ...]:
    """Where the outputs sit among the open parameters: where `output_names`
    says; else among the parameters the kernel writes (``evidence.written``)
    when the call fits them (``placement.place_written``); else by the rule
    (``placement.place_outputs``), or, when the rule's placement is in
    ``evidence.avoid`` (its trace failed, or wrote elsewhere), the next best
    placement (``placement.probe_rank``), one sharing no position with
    ``evidence.apart_from`` first."""
    if output_names is not None:
        return named_outputs(sig, open_params, output_names, num_outputs)
    kinds = [arg_kind(a) for a in args]
    if evidence.written and num_outputs:
        found = place_written(sig, open_params, kinds, num_outputs, order,
                              evidence.written, args, evidence.in_leaves)
        if found is not None:
            return found
    rule = place_outputs(sig, open_params, kinds, num_outputs, order, args)
    avoid, apart = evidence.avoid, set(evidence.apart_from)
    if rule not in avoid:
        return rule
    others = sorted((bool(apart & set(outs)), probe_rank(order, outs, open_params, kinds),
                     s, outs) for s, outs in
                    placements(sig, open_params, kinds, num_outputs, order)
                    if outs not in avoid)
    return others[0][3] if others else rule


def _check_keywords(sig: LauncherSignature, kwargs, constexpr_names) -> dict:
    """Every call-time keyword names a parameter that is not the stream nor
    a constexpr; returns {name: Param} of the launcher's parameters."""
    by_name = {p.name: p for p in sig.params + sig.keyword_only}
    for k in kwargs:
        p = by_name.get(k)
        if p is None or p.kind == STREAM:
            raise TypeError(f"cutecall: launcher '{sig.name}' has no parameter "
                            f"{k!r} to pass at call time; its parameters are "
                            f"{', '.join(sig.keyword_names())}")
        if k in constexpr_names:
            raise TypeError(f"cutecall: {k!r} of launcher '{sig.name}' was given "
                            "to cutlass_call(...) as a constexpr; it cannot also "
                            "be passed at call time")
    return by_name


def _fill_defaults(sig: LauncherSignature, slots: list, kwargs, constexpr_names) -> None:
    """Parameters no argument filled take their default (or are constexprs);
    any other is an error, as is a keyword-only one given nowhere."""
    for i, p in enumerate(sig.params):
        if slots[i] is None:
            if p.name in constexpr_names or p.has_default:
                slots[i] = DEFAULT_SLOT
            else:
                raise TypeError(f"cutecall: launcher '{sig.name}' parameter "
                                f"{p.name!r} receives no value")
    for p in sig.keyword_only:
        if not p.has_default and p.name not in kwargs and \
                p.name not in constexpr_names:
            raise TypeError(f"cutecall: launcher '{sig.name}' needs keyword "
                            f"argument {p.name!r} (a constexpr to cutlass_call, "
                            "or a runtime scalar at call time)")


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
