"""Launcher signatures: which parameter is the stream, which are tensors,
runtime scalars and constexprs, and how one call binds to them.

No CuTe DSL import. Annotations are read by name (``CUstream``,
``Float32``, ``Constexpr``...) so string annotations and
``from __future__ import annotations`` work the same.

The rule a user chooses by: a value given to ``cutlass_call(...)`` is a
compile-time constant (constexpr); a value given to the call is a runtime
value: arrays become tensors, scalars become runtime scalars (one compile
serves every value).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing

from .scalars import SCALAR_TYPES, is_scalar_value, python_value

STREAM, TENSOR, SCALAR, CONSTEXPR = "stream", "tensor", "scalar", "constexpr"
ORDERS = ("inputs_first", "outputs_first")


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    kind: str                   # STREAM, TENSOR, SCALAR or CONSTEXPR
    scalar_type: str | None     # for SCALAR: a SCALAR_TYPES entry
    has_default: bool
    keyword_only: bool
    # TENSOR only: annotated as a tensor (``cute.Tensor``,
    # ``Optional[cute.Tensor]``); unannotated parameters are TENSOR too,
    # but a runtime scalar may fill them.
    annotated: bool = False
    # Annotated as optional (``Optional[...]``, ``X | None``): an absent
    # input more often than an output.
    optional: bool = False
    # The Python default (None when none: ``has_default`` tells them apart).
    # Not ``inspect.Parameter.empty``: Python 3.10's dataclass docstring
    # would read it as "no default" and reject the class.
    default: typing.Any = dataclasses.field(default=None, compare=False,
                                            repr=False)
    # The NamedTuple class the annotation names (``pair: Pair``,
    # ``Optional[BlockSparseTensors]``): a plain tuple passed here is
    # rebuilt as one (``pytree.flatten``); or a tuple annotation
    # (``Tuple[Int32, Int32]``) that types its items. None otherwise.
    container: typing.Any = dataclasses.field(default=None, compare=False,
                                              repr=False)


@dataclasses.dataclass(frozen=True)
class LauncherSignature:
    """What cutecall knows of a launcher's parameters. ``inspected`` is False
    when the signature could not be read or takes ``*args``: then the
    ``(stream, *inputs, *outputs, **constexprs)`` convention applies."""

    name: str
    params: tuple[Param, ...]       # positional parameters, in order
    keyword_only: tuple[Param, ...]
    var_keyword: bool
    inspected: bool

    def keyword_names(self) -> list[str]:
        return [p.name for p in self.params + self.keyword_only
                if p.kind != STREAM]

    def check_constexprs(self, names) -> None:
        if not self.inspected or self.var_keyword:
            return
        known = set(self.keyword_names())
        for k in names:
            if k not in known:
                raise TypeError(
                    f"cutecall: launcher '{self.name}' has no parameter {k!r}; "
                    f"its parameters are {', '.join(sorted(known)) or '(none)'}")


def annotation_names(annotation) -> list[str]:
    """The type names an annotation mentions, innermost last: ``"cute.Tensor"``
    -> ``["Tensor"]``, ``Optional[cute.Tensor]`` -> ``["Optional", "Tensor",
    "NoneType"]``, ``Int32 | int | None`` -> ``["Int32", "int", "NoneType"]``.
    String annotations (``from __future__ import annotations``) are split
    into their dotted words."""
    if annotation is inspect.Parameter.empty:
        return []
    if isinstance(annotation, typing.ForwardRef):  # a NamedTuple's string annotation
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return [w.rsplit(".", 1)[-1] for w in
                re.findall(r"[A-Za-z_][\w.]*", annotation)]
    names = [getattr(annotation, "__name__", "") or type(annotation).__name__]
    for arg in typing.get_args(annotation):
        names += annotation_names(arg)
    return names


def namedtuple_class(annotation):
    """The NamedTuple class an annotation names (itself, or inside
    ``Optional``/``Union``/``X | None``), else None."""
    if isinstance(annotation, type):
        return annotation if issubclass(annotation, tuple) and \
            hasattr(annotation, "_fields") and hasattr(annotation, "_make") else None
    for arg in typing.get_args(annotation):
        found = namedtuple_class(arg)
        if found is not None:
            return found
    return None


def type_hints(obj) -> dict:
    """``typing.get_type_hints`` of a function, a kernel object's
    ``__call__`` or a class, with string annotations resolved where they can
    be; {} where they cannot."""
    for target in (obj, getattr(type(obj), "__call__", None)):
        try:
            return typing.get_type_hints(target)
        except Exception:  # unresolvable names, objects without annotations
            continue
    return {}


# A parameter annotated as a container of scalars (cuDNN's ``problem_shape:
# Tuple[Int32, Int32, Int32, Tuple[Int32, Int32]]``) takes a pytree: its
# leaves are runtime scalars, the parameter is not one.
_CONTAINERS = ("Tuple", "tuple", "List", "list")


def _classify(p: inspect.Parameter, hint=None) -> Param:
    names = annotation_names(p.annotation)
    first = names[0] if names else ""
    scalar = next((n for n in names if n in SCALAR_TYPES), None)
    if first == "CUstream" or (not names and p.name == "stream"):
        kind, st = STREAM, None
    elif first.startswith("Constexpr"):
        kind, st = CONSTEXPR, None
    elif scalar is not None and not any("Tensor" in n for n in names) and \
            first not in _CONTAINERS:
        kind, st = SCALAR, scalar
    else:
        kind, st = TENSOR, None
    annotated = kind == TENSOR and any("Tensor" in n for n in names)
    optional = any(n in ("Optional", "NoneType", "None") for n in names)
    return Param(p.name, kind, st, p.default is not inspect.Parameter.empty,
                 p.kind == p.KEYWORD_ONLY, annotated, optional,
                 None if p.default is inspect.Parameter.empty else p.default,
                 _container(p.annotation if hint is None else hint)
                 if kind == TENSOR else None)


def _container(annotation):
    """What :attr:`Param.container` keeps of a tensor parameter's
    annotation: its NamedTuple class, else the annotation itself when it
    types a tuple's items (``Tuple[Int32, ...]``, maybe ``Optional``)."""
    cls = namedtuple_class(annotation)
    if cls is not None or annotation is None or isinstance(annotation, str):
        return cls
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Union and len(args) == 1:
        return _container(args[0])
    return annotation if typing.get_origin(annotation) in (tuple, list) else None


def scalar_defaults(sig: LauncherSignature, given) -> tuple:
    """``(name, scalar type, value)`` for each parameter annotated as a DSL
    runtime scalar that the call leaves at a Python-number default
    (``eps: cutlass.Float32 = 1e-6``): the generated entry passes it as a
    value of its annotated type (``cutlass.Float32(1e-6)``), which the DSL
    does not do for a default. `given`: the names the call fills."""
    out = []
    for p in sig.params + sig.keyword_only:
        if p.kind == SCALAR and p.name not in given and \
                is_scalar_value(p.default):
            out.append((p.name, p.scalar_type, python_value(p.default, p.name)))
    return tuple(out)


def analyze(fn) -> LauncherSignature:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    target = inspect.unwrap(getattr(fn, "__wrapped__", fn))
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return LauncherSignature(name, (), (), True, False)
    params, kwonly, var_kw, var_pos = [], [], False, False
    hints = type_hints(target) if any(
        isinstance(p.annotation, str) for p in sig.parameters.values()) else {}
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            params.append(_classify(p, hints.get(p.name)))
        elif p.kind == p.KEYWORD_ONLY:
            kwonly.append(_classify(p, hints.get(p.name)))
        elif p.kind == p.VAR_KEYWORD:
            var_kw = True
        else:
            var_pos = True
    if var_pos:
        return LauncherSignature(name, (), tuple(kwonly), var_kw, False)
    streams = [p.name for p in params if p.kind == STREAM]
    if len(streams) > 1:
        raise TypeError(f"cutecall: launcher '{name}' has {len(streams)} stream "
                        f"parameters ({', '.join(streams)}); it takes one, "
                        "XLA's stream")
    return LauncherSignature(name, tuple(params), tuple(kwonly), var_kw, True)
