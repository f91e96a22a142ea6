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
from .placement import arg_kind, named_outputs, place_outputs
from .signature import (SCALAR, STREAM, TENSOR, LauncherSignature, Param,
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


def bind(sig: LauncherSignature, args: Sequence[Any], kwargs: Mapping[str, Any],
         num_outputs: int, order: str, constexpr_names,
         output_names: Sequence[str] | None = None,
         scalar_value: Callable[[Any, str], Any] = concrete_scalar,
         is_array: Callable[[Any], bool] = default_is_array) -> tuple[Binding, list]:
    """Binds a call's arguments; returns the binding and the values of the
    array leaves (in ``Binding.leaves`` order). `output_names` names the
    output parameters (in output order) instead of placing them.
    `scalar_value(x, what)` is the front's reading of a runtime scalar
    argument as a host value (it raises, naming `what`, for values that
    have none, e.g. traced ones); `is_array` says what its arrays are.

    A positional argument that is neither None nor a scalar is a pytree
    (``pytree``): an array, a container of arrays, runtime scalars, None and
    compile-time values, or one compile-time value."""
    scalars: list = []  # ScalarArg
    trees, paths, values = [], [], []

    def tree(a, name: str) -> Slot:
        def on_scalar(path, value, scalar_type):
            what = f"{name}{pytree.keystr(path)}"
            v = scalar_value(value, f"runtime scalar {what!r} ({scalar_type})")
            scalars.append(encode_scalar(what, scalar_type, v))
            return len(scalars) - 1
        node, found = pytree.flatten(a, is_array, on_scalar)
        paths.extend((len(trees), p) for p, _ in found)
        values.extend(v for _, v in found)
        trees.append(node)
        return Slot(SlotKind.INPUT, len(trees) - 1)

    def done(slots, arrays, keyword_scalars, absent, arg_slots) -> tuple[Binding, list]:
        return Binding(tuple(slots), tuple(arrays), tuple(scalars),
                       tuple(keyword_scalars), tuple(absent), tuple(trees),
                       tuple(paths), tuple(arg_slots)), values

    if not sig.inspected:  # (stream, *inputs, *outputs, **constexprs)
        if kwargs:
            raise TypeError(f"cutecall: launcher '{sig.name}' takes *args, so "
                            f"call-time keyword arguments {sorted(kwargs)} cannot "
                            "be bound; pass them positionally")
        slots, arrays, absent = [STREAM_SLOT], [], []
        for i, a in enumerate(args):
            if a is None:
                slots.append(NONE_SLOT)
                absent.append(i)
            elif is_scalar_value(a) or pytree.dsl_scalar_type(a):
                st = pytree.dsl_scalar_type(a)
                v = a.value if st else python_value(a, f"argument {i}")
                scalars.append(encode_scalar(f"arg{i}", st or infer_scalar_type(v), v))
                slots.append(Slot(SlotKind.SCALAR, len(scalars) - 1))
            else:
                check_argument(a, f"argument {i} of '{sig.name}'", is_array)
                slots.append(tree(a, f"arg{i}"))
                arrays.append(i)
        arg_slots = slots[1:]
        slots += [Slot(SlotKind.OUTPUT, j) for j in range(num_outputs)]
        return done(slots, arrays, (), absent, arg_slots)

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
    open_params = [i for i, p in enumerate(sig.params)
                   if p.kind in (TENSOR, SCALAR) and p.name not in kwargs
                   and p.name not in constexpr_names]
    kinds = [arg_kind(a) for a in args]
    if output_names is None:
        out_pos = place_outputs(sig, open_params, kinds, num_outputs, order,
                                args)
    else:
        out_pos = named_outputs(sig, open_params, output_names, num_outputs)
    in_pos = [i for i in open_params if i not in out_pos][:len(args)]

    slots: list = [None] * len(sig.params)
    arrays, absent = [], []
    for i, p in enumerate(sig.params):
        if p.kind == STREAM:
            slots[i] = STREAM_SLOT
    for j, i in enumerate(out_pos):
        slots[i] = Slot(SlotKind.OUTPUT, j)

    def scalar(p: Param, value, what) -> Slot:
        st = pytree.dsl_scalar_type(value)
        v = scalar_value(value.value if st else value, what)
        st = p.scalar_type or st or infer_scalar_type(v)
        scalars.append(encode_scalar(p.name, st, v))
        return Slot(SlotKind.SCALAR, len(scalars) - 1)

    for k, i in enumerate(in_pos):
        p, a = sig.params[i], args[k]
        if a is None:
            slots[i] = NONE_SLOT
            absent.append(k)
        elif p.kind == SCALAR or is_scalar_value(a) or pytree.dsl_scalar_type(a):
            slots[i] = scalar(p, a, f"argument {p.name!r} of '{sig.name}'")
        else:
            check_argument(a, f"argument {p.name!r} of '{sig.name}'", is_array)
            slots[i] = tree(a, p.name)
            arrays.append(k)
    keyword_scalars = []
    for k, v in kwargs.items():
        p = by_name[k]
        if p.kind == TENSOR and not (is_scalar_value(v) or pytree.dsl_scalar_type(v)):
            raise TypeError(f"cutecall: array argument {k!r} of '{sig.name}' "
                            "must be passed positionally (keywords carry "
                            "runtime scalars only)")
        if p.kind == TENSOR and p.annotated:
            raise TypeError(f"cutecall: {k}={v!r}: parameter {k!r} of "
                            f"'{sig.name}' is annotated as a tensor; a scalar "
                            "cannot fill it")
        s = scalar(p, v, f"argument {k!r} of '{sig.name}'")
        if p.keyword_only:
            keyword_scalars.append((k, s.index))
        else:
            slots[sig.params.index(p)] = s
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
    return done(slots, arrays, keyword_scalars, absent,
                [slots[i] for i in in_pos[:len(args)]])


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
