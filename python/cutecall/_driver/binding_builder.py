"""Reading one call's arguments into a binding, argument by argument:
:class:`BindingBuilder` turns each positional or keyword argument into the
:class:`~slots.Slot` that fills its parameter -- a pytree of arrays (its
leaves' paths and values collected), a runtime scalar (typed and encoded),
``None`` (an absent optional) or a compile-time value -- and checks that a
call's arguments are of those kinds (:func:`check_argument`). ``binding``
decides which parameter each argument fills. Pure Python, no CuTe DSL import.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from . import pytree
from .outputs.candidates import VALUE, arg_kind
from .scalars import encode_scalar, infer_scalar_type, is_scalar_value, python_value
from .signature import CONSTEXPR, SCALAR, TENSOR, LauncherSignature, Param
from .slots import NONE_SLOT, STREAM_SLOT, Binding, Slot, SlotKind


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


class BindingBuilder:
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
