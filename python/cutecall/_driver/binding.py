"""Binding one call to a launcher's parameters.

The rule, the same in the JAX and the torch fronts: the call's positional
arguments fill the launcher's parameters that are neither the stream nor
outputs, in the launcher's order, wherever the outputs sit. Where the
outputs sit is read from the launcher's signature and the call:

* outputs are tensor parameters (never one annotated as a runtime scalar)
  and, where possible, ones without a default and not ``Optional``;
* they follow the last array argument (``operand_order="inputs_first"``,
  the convention of QuACK, FA4 and CUTLASS: inputs, outputs, then scalars)
  or precede the first (``"outputs_first"``);
* runtime scalars bind after the outputs unless an annotation
  (``eps: cutlass.Float32``) places them before.

A scalar never lands in a parameter annotated as a tensor, nor an array in
one annotated as a scalar. When the rule leaves two bindings equally good,
the call is ambiguous: a ``TypeError`` before compiling names the
parameters and values, and says how to disambiguate (annotate, or pass by
keyword).

Pure Python, no CuTe DSL import.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Mapping, Sequence

from .signature import (SCALAR, STREAM, TENSOR, LauncherSignature, Param,
                        ScalarArg, concrete_scalar, encode_scalar,
                        infer_scalar_type, is_scalar_value, python_value)

# A call argument's kind, for placing outputs.
ARRAY, SCALAR_ARG, NONE_ARG = "array", "scalar", "none"
# Placements tried before giving up (C(20, 10) would be 184,756).
_MAX_PLACEMENTS = 20000


@dataclasses.dataclass(frozen=True)
class Binding:
    """How one call fills the launcher's positional parameters. Hashable: it
    is a static argument of the traced call (scalar values included, so each
    distinct value lowers its own custom call; the DSL compile is shared).

    ``slots[i]`` for positional parameter ``i``: ``("stream",)``,
    ``("in", k)`` (the call's k-th positional array argument),
    ``("out", j)`` (the j-th kernel output), ``("scalar", s)``,
    ``("none",)`` (``None``, passed as is) or ``("default",)`` (left to its
    default value). ``arrays[k]`` is the call's positional index of array
    argument k.
    """

    slots: tuple
    arrays: tuple
    scalars: tuple          # ScalarArg, in slot order
    keyword_scalars: tuple  # (param name, scalar index) for keyword-only


def arg_kind(x) -> str:
    """A 0-d array counts as a scalar (cutecall has no rank-0 tensors: a
    runtime scalar parameter takes it, or says why a traced one cannot)."""
    if x is None:
        return NONE_ARG
    if is_scalar_value(x) or tuple(getattr(x, "shape", (1,))) == ():
        return SCALAR_ARG
    return ARRAY


def _fits(p: Param, kind: str) -> bool:
    if kind == SCALAR_ARG:
        return p.kind == SCALAR or (p.kind == TENSOR and not p.annotated)
    if kind == ARRAY:
        return p.kind != SCALAR
    return True  # None: an absent Optional of any kind


def score(order: str, outs, rest, kinds, params) -> tuple:
    """Lower is better. Outputs without defaults first; then the
    convention: arrays before (inputs_first) or after (outputs_first) the
    outputs; then outputs not annotated ``Optional``; then scalars after
    the outputs."""
    defaults = sum(params[i].has_default for i in outs)
    optional = sum(params[i].optional for i in outs)
    placed = list(zip(rest, kinds))
    first, last = min(outs), max(outs)
    if order == "inputs_first":
        misplaced = sum(k != SCALAR_ARG and i > first for i, k in placed)
    else:
        misplaced = sum(k != SCALAR_ARG and i < last for i, k in placed)
    scalars = sum(k == SCALAR_ARG and i < last for i, k in placed)
    return defaults, misplaced, optional, scalars


def placements(sig: LauncherSignature, open_params: Sequence[int],
               kinds: Sequence[str] | None, num_outputs: int, order: str):
    """Yields ``(score, outputs)`` for every placement of `num_outputs`
    outputs among the open parameters that the call fits (lower scores are
    better; at most ``_MAX_PLACEMENTS`` are tried). `kinds` are the kinds of
    the call's positional arguments; ``None`` means every parameter left
    receives a value of its own annotated kind (a launch object's outputs,
    placed before any call)."""
    params = sig.params
    candidates = [i for i in open_params if params[i].kind == TENSOR]
    for count, outs in enumerate(itertools.combinations(candidates, num_outputs)):
        if count >= _MAX_PLACEMENTS:
            return
        rest = [i for i in open_params if i not in outs]
        given = kinds if kinds is not None else [
            SCALAR_ARG if params[i].kind == SCALAR else ARRAY for i in rest]
        n = len(given)
        if n > len(rest) or any(not params[i].has_default for i in rest[n:]):
            continue
        if not all(_fits(params[i], k) for i, k in zip(rest, given)):
            continue
        yield (score(order, outs, rest, given, params) if outs else (0,)), outs


def place_outputs(sig: LauncherSignature, open_params: Sequence[int],
                  kinds: Sequence[str], num_outputs: int, order: str,
                  values: Sequence[Any] = ()) -> tuple[int, ...]:
    """The positions (indices into ``sig.params``) of the outputs, given the
    open parameters (those the call fills), the kinds of the call's
    positional arguments and the number of outputs. Raises ``TypeError``
    when no binding fits or two fit equally well."""
    params = sig.params
    candidates = [i for i in open_params if params[i].kind == TENSOR]
    n = len(kinds)
    best, best_score, ties = None, None, []
    for score_, outs in placements(sig, open_params, kinds, num_outputs, order):
        if best_score is None or score_ < best_score:
            best, best_score, ties = outs, score_, []
        elif score_ == best_score:
            ties.append(outs)
    names = [params[i].name for i in open_params]
    shown = ", ".join(_show(v) for v in values) if values else f"{n} argument(s)"
    required = sum(not params[i].has_default for i in open_params)
    if best is None and n + num_outputs < required:
        # Too few arguments: name the first parameter left without one.
        for outs in itertools.combinations(candidates, num_outputs):
            rest = [i for i in open_params if i not in outs]
            if all(_fits(params[i], k) for i, k in zip(rest, kinds)):
                missing = next(params[i].name for i in rest[n:]
                               if not params[i].has_default)
                raise TypeError(
                    f"cutecall: launcher '{sig.name}' parameter {missing!r} "
                    f"receives no value: the call passes {n} positional "
                    f"argument(s) ({shown}) and {num_outputs} output(s) for "
                    f"parameters ({', '.join(names)})")
    if best is None:
        raise TypeError(
            f"cutecall: launcher '{sig.name}' has {len(names)} parameters for "
            f"arrays and runtime scalars ({', '.join(names) or 'none'}), "
            f"{num_outputs} of them output(s), but the call passes {n} "
            f"positional argument(s) ({shown}) that no binding fits: a "
            "scalar cannot fill a parameter annotated as a tensor, nor an "
            "array one annotated as a scalar, and parameters without "
            "defaults need a value.")
    if ties:
        options = "; ".join(
            "outputs " + ", ".join(params[i].name for i in o)
            for o in [best] + ties[:3])
        raise TypeError(
            f"cutecall: the call ({shown}) of launcher '{sig.name}' binds to "
            f"its parameters ({', '.join(names)}) in more than one way "
            f"({options}). Annotate the launcher's runtime scalars "
            "(e.g. `eps: cutlass.Float32`) and tensors (`cute.Tensor`), or "
            "pass the scalars by keyword.")
    return best


def _show(v) -> str:
    if v is None or is_scalar_value(v):
        return repr(v)
    shape = getattr(v, "shape", None)
    dtype = getattr(v, "dtype", None)
    return f"{dtype}{list(shape)}" if shape is not None else type(v).__name__


def bind(sig: LauncherSignature, args: Sequence[Any], kwargs: Mapping[str, Any],
         num_outputs: int, order: str, constexpr_names,
         output_names: Sequence[str] | None = None) -> tuple[Binding, list]:
    """Binds a call's arguments; returns the binding and the array arguments
    (pytrees, None allowed) in launcher order. `output_names` names the
    output parameters (in output order) instead of placing them."""
    scalars: list[ScalarArg] = []
    if not sig.inspected:  # (stream, *inputs, *outputs, **constexprs)
        if kwargs:
            raise TypeError(f"cutecall: launcher '{sig.name}' takes *args, so "
                            f"call-time keyword arguments {sorted(kwargs)} cannot "
                            "be bound; pass them positionally")
        slots, arrays, array_args = [("stream",)], [], []
        for i, a in enumerate(args):
            if is_scalar_value(a):
                v = python_value(a, f"argument {i}")
                scalars.append(encode_scalar(f"arg{i}", infer_scalar_type(v), v))
                slots.append(("scalar", len(scalars) - 1))
            else:
                slots.append(("in", len(arrays)))
                arrays.append(i)
                array_args.append(a)
        slots += [("out", j) for j in range(num_outputs)]
        return Binding(tuple(slots), tuple(arrays), tuple(scalars),
                       ()), array_args

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
        out_pos = _named_outputs(sig, open_params, output_names, num_outputs)
    in_pos = [i for i in open_params if i not in out_pos][:len(args)]

    slots: list = [None] * len(sig.params)
    arrays, array_args = [], []
    for i, p in enumerate(sig.params):
        if p.kind == STREAM:
            slots[i] = ("stream",)
    for j, i in enumerate(out_pos):
        slots[i] = ("out", j)

    def scalar(p: Param, value, what) -> tuple:
        v = concrete_scalar(value, what)
        st = p.scalar_type or infer_scalar_type(v)
        scalars.append(encode_scalar(p.name, st, v))
        return ("scalar", len(scalars) - 1)

    for k, i in enumerate(in_pos):
        p, a = sig.params[i], args[k]
        if a is not None and (p.kind == SCALAR or is_scalar_value(a)):
            slots[i] = scalar(p, a, f"argument {p.name!r} of '{sig.name}'")
        else:
            slots[i] = ("in", len(arrays))
            arrays.append(k)
            array_args.append(a)
    keyword_scalars = []
    for k, v in kwargs.items():
        p = by_name[k]
        if p.kind == TENSOR and not is_scalar_value(v):
            raise TypeError(f"cutecall: array argument {k!r} of '{sig.name}' "
                            "must be passed positionally (keywords carry "
                            "runtime scalars only)")
        if p.kind == TENSOR and p.annotated:
            raise TypeError(f"cutecall: {k}={v!r}: parameter {k!r} of "
                            f"'{sig.name}' is annotated as a tensor; a scalar "
                            "cannot fill it")
        s = scalar(p, v, f"argument {k!r} of '{sig.name}'")
        if p.keyword_only:
            keyword_scalars.append((k, s[1]))
        else:
            slots[sig.params.index(p)] = s
    for i, p in enumerate(sig.params):
        if slots[i] is None:
            if p.name in constexpr_names or p.has_default:
                slots[i] = ("default",)
            else:
                raise TypeError(f"cutecall: launcher '{sig.name}' parameter "
                                f"{p.name!r} receives no value")
    for p in sig.keyword_only:
        if not p.has_default and p.name not in kwargs and \
                p.name not in constexpr_names:
            raise TypeError(f"cutecall: launcher '{sig.name}' needs keyword "
                            f"argument {p.name!r} (a constexpr to cutlass_call, "
                            "or a runtime scalar at call time)")
    return Binding(tuple(slots), tuple(arrays), tuple(scalars),
                   tuple(keyword_scalars)), array_args


def _named_outputs(sig, open_params, names, num_outputs) -> tuple[int, ...]:
    tensors = {sig.params[i].name: i for i in open_params
               if sig.params[i].kind == TENSOR}
    for n in names:
        if n not in tensors:
            raise TypeError(f"cutecall: output_params names {n!r}, which is not "
                            f"a tensor parameter of '{sig.name}' the call "
                            f"fills; those are {', '.join(tensors) or 'none'}")
    if len(set(names)) != len(names) or len(names) != num_outputs:
        raise TypeError(f"cutecall: output_params {tuple(names)} of "
                        f"'{sig.name}' must name {num_outputs} distinct "
                        f"parameter(s), one per output")
    return tuple(tensors[n] for n in names)


def describe(sig: LauncherSignature, binding: Binding) -> str:
    """How a call was bound, for error messages: ``x=input 0, o=output 0,
    eps=scalar Float32``."""
    if not sig.inspected:
        return ""
    parts = []
    for p, slot in zip(sig.params, binding.slots):
        what = {"stream": "stream", "in": "input", "out": "output",
                "scalar": "scalar", "none": "None",
                "default": "default"}[slot[0]]
        if slot[0] in ("in", "out"):
            what += f" {slot[1]}"
        elif slot[0] == "scalar":
            what += f" {binding.scalars[slot[1]].scalar_type}"
        parts.append(f"{p.name}={what}")
    return ", ".join(parts)
