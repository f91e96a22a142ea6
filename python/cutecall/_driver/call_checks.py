"""What a call got wrong, said about the argument: checks of a call's
arguments against the launcher's parameters that name the argument, its
value and what the parameter takes, before anything compiles.

* :func:`explain`: when no binding fits a call (``placement``), the
  argument that does not fit the parameter it reaches read positionally --
  a scalar or a tuple where ``cute.Tensor`` is annotated, an array where a
  runtime scalar is -- or that the call passes too many values;
* :func:`check_counts`: a front whose outputs come from elsewhere (JAX's
  ``output_shape_dtype``) says how many values reach the parameters;
* :func:`check_nones`: ``None`` for a parameter annotated ``cute.Tensor``
  (not ``Optional``, no default) that every placement of the outputs
  reaches: an absent optional is declared ``Optional[cute.Tensor]``.

No framework, no CuTe DSL.
"""

from __future__ import annotations

from typing import Any, Sequence

from .slots import SlotKind
from .outputs.candidates import ARRAY, CONTAINER, NONE_ARG, SCALAR_ARG, arg_kind, placements
from .scalars import is_scalar_value
from .signature import CONSTEXPR, SCALAR, TENSOR, LauncherSignature, Param


def show(v) -> str:
    """A value as errors show it: ``2.0``, ``float32[8]``, ``a tuple of 2
    (float32[8], float32[8])``, ``ndarray float32[8]``."""
    if v is None or is_scalar_value(v):
        return f"the {type(v).__name__} {v!r}" if v is not None else "None"
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{str(dtype).removeprefix('torch.')}{list(shape)}"
    if isinstance(v, (tuple, list, dict)):
        items = list(v.values() if isinstance(v, dict) else v)
        inner = ", ".join(repr(x) if is_scalar_value(x) else show(x) for x in items[:4])
        more = ", ..." if len(items) > 4 else ""
        return f"a {type(v).__name__} of {len(items)} ({inner}{more})"
    return f"{type(v).__name__} {v!r}"


def open_params(sig: LauncherSignature, kwargs, constexpr_names) -> list[int]:
    """The parameters a call's positional arguments and outputs fill."""
    return [i for i, p in enumerate(sig.params)
            if p.kind in (TENSOR, SCALAR) and p.name not in kwargs
            and p.name not in constexpr_names]


def explain(sig: LauncherSignature, args: Sequence[Any], kwargs, constexpr_names,
            num_outputs: int, order: str) -> str | None:
    """Why no binding fits a call, said about the argument, when the call
    shows it: too many values, or an argument of a kind the parameter it
    reaches read positionally (the arguments, then the outputs) cannot
    take. None when it cannot tell, or some binding fits (the binding's
    error is about something else)."""
    if not sig.inspected or any(_rank0(a) for a in args):
        return None  # (placement names a rank-0 array itself)
    params = open_params(sig, kwargs, constexpr_names)
    kinds = [arg_kind(a) for a in args]
    if next(placements(sig, params, kinds, num_outputs, order), None) is not None:
        return None
    n, names = len(kinds), [sig.params[i].name for i in params]
    tail = f" (no binding fits the call: {', '.join(show(v) for v in args)})"
    if n + num_outputs > len(params):
        outs = f" and {num_outputs} output(s)" if num_outputs else ""
        return (f"cutecall: launcher '{sig.name}' takes {len(params)} array or scalar "
                f"parameter(s) ({', '.join(names) or 'none'}), but the call passes "
                f"{n} positional argument(s){outs}: {n + num_outputs - len(params)} "
                f"too many{tail}")
    start = num_outputs if order == "outputs_first" else 0
    for k, (i, kind) in enumerate(zip(params[start:], kinds)):
        problem = _misfit(sig.params[i], kind, args[k])
        if problem:
            return (f"cutecall: argument {sig.params[i].name!r} (position {k}) of "
                    f"'{sig.name}' {problem}{tail}")
    counted = _too_many_of_a_kind(sig, params, kinds, num_outputs)
    return f"cutecall: launcher '{sig.name}' {counted}{tail}" if counted else None


def explain_any_outputs(sig: LauncherSignature, args: Sequence[Any], kwargs,
                        constexpr_names, order: str) -> str | None:
    """:func:`explain` for a call whose number of outputs is not known (the
    front could not compute them): why the call binds with no number of
    outputs, said for the number that leaves no parameter empty; None when
    some number fits, or it cannot tell."""
    if not sig.inspected or any(_rank0(a) for a in args):
        return None
    params = open_params(sig, kwargs, constexpr_names)
    kinds = [arg_kind(a) for a in args]
    most = max(len(params) - len(args), 0)
    bad_none = None
    for k in range(most + 1):
        for _, outs in placements(sig, params, kinds, k, order):
            bad_none = _none_in_tensor(sig, params, kinds, outs)
            if bad_none is None:
                return None
    if bad_none is not None:
        return _none_message(sig, sig.params[bad_none])
    return explain(sig, args, kwargs, constexpr_names, most, order)


def _too_many_of_a_kind(sig: LauncherSignature, params: Sequence[int],
                        kinds: Sequence[str], num_outputs: int) -> str:
    """More arrays (and outputs) than tensor parameters, or more scalars
    than parameters a scalar can fill: what the call passes, or ""."""
    tensors = [sig.params[i].name for i in params if sig.params[i].kind == TENSOR]
    arrays = sum(k in (ARRAY, CONTAINER) for k in kinds)
    if arrays + num_outputs > len(tensors):
        outs = f" and {num_outputs} output(s)" if num_outputs else ""
        return (f"takes {len(tensors)} tensor parameter(s) ({', '.join(tensors) or 'none'}), "
                f"but the call passes {arrays} array(s){outs}")
    takes = [sig.params[i].name for i in params if sig.params[i].kind == SCALAR or
             (sig.params[i].kind == TENSOR and not sig.params[i].annotated)]
    scalars = sum(k == SCALAR_ARG for k in kinds)
    if scalars > len(takes):
        return (f"takes {len(takes)} parameter(s) a runtime scalar can fill "
                f"({', '.join(takes) or 'none'}), but the call passes {scalars} scalar(s)")
    return ""


def _rank0(a) -> bool:
    return getattr(a, "shape", None) == () and hasattr(a, "dtype")


def _misfit(p: Param, kind: str, value) -> str:
    """Why an argument of `kind` cannot fill parameter `p`, or ""."""
    v = show(value)
    if kind == SCALAR_ARG and p.kind == TENSOR and p.annotated:
        return (f"is {v}, but parameter {p.name!r} is annotated as a tensor "
                f"(cute.Tensor): pass an array there")
    if kind == CONTAINER and p.kind == TENSOR and p.annotated and p.container is None:
        return (f"is {v}, but parameter {p.name!r} is annotated as one tensor "
                f"(cute.Tensor): pass one array (a container goes to a parameter "
                f"annotated as a NamedTuple or Tuple[...])")
    if kind in (ARRAY, CONTAINER) and p.kind == SCALAR:
        return (f"is {v}, but parameter {p.name!r} is a runtime scalar "
                f"({p.scalar_type}): pass a Python number")
    return ""


def check_counts(sig: LauncherSignature, num_args: int, num_outputs: int, kwargs,
                 constexpr_names, outputs_from: str) -> None:
    """Raises a TypeError when `num_args` positional arguments and
    `num_outputs` outputs (given by `outputs_from`, e.g.
    ``"output_shape_dtype"``) are more values than the launcher has
    parameters for (too few: the binding names the parameter left empty)."""
    if not sig.inspected:
        return
    params = open_params(sig, kwargs, constexpr_names)
    total = num_args + num_outputs
    # A Constexpr parameter not bound at construction takes a positional
    # value too (binding by the launcher's annotations).
    takes_values = sum(p.kind == CONSTEXPR and not p.keyword_only and p.name not in kwargs
                       and p.name not in constexpr_names for p in sig.params)
    if total <= len(params) + takes_values:
        return
    names = ", ".join(sig.params[i].name for i in params) or "none"
    raise TypeError(
        f"cutecall: '{sig.name}' was called with {num_args} positional argument(s) "
        f"and {outputs_from} gives {num_outputs} output(s): {total} values for the "
        f"launcher's {len(params)} array or scalar parameter(s) ({names}); "
        f"{total - len(params)} too many: fewer arguments, or fewer outputs from "
        f"{outputs_from}")


def check_nones(sig: LauncherSignature, slots: Sequence, args: Sequence, kwargs,
                constexpr_names, num_outputs: int, order: str, fixed: bool) -> None:
    """Raises a TypeError for a ``None`` argument bound to a parameter
    annotated ``cute.Tensor`` (not ``Optional``, no default) when no
    placement of the outputs binds it elsewhere (`fixed`: the outputs'
    places are known, named or none)."""
    bad = _bad_none(sig, slots)
    if bad is None:
        return
    if not fixed:
        params = open_params(sig, kwargs, constexpr_names)
        kinds = [arg_kind(a) for a in args]
        for _, outs in placements(sig, params, kinds, num_outputs, order):
            if _none_in_tensor(sig, params, kinds, outs) is None:
                return  # a binding where every None lands in an optional
    raise TypeError(_none_message(sig, sig.params[bad]))


def _none_message(sig: LauncherSignature, p: Param) -> str:
    return (f"cutecall: argument {p.name!r} of '{sig.name}' is None, but parameter "
            f"{p.name!r} is annotated cute.Tensor, not Optional[cute.Tensor]: pass an "
            f"array (a launcher that takes None there annotates it Optional)")


def _none_in_tensor(sig: LauncherSignature, params: Sequence[int], kinds: Sequence[str],
                    outs) -> int | None:
    """With the outputs at `outs`, the first parameter a None argument
    fills that takes none, or None."""
    rest = [i for i in params if i not in outs]
    return next((i for i, k in zip(rest, kinds)
                 if k == NONE_ARG and _takes_no_none(sig.params[i])), None)


def _takes_no_none(p: Param) -> bool:
    return p.kind == TENSOR and p.annotated and not p.optional and not p.has_default


def _bad_none(sig: LauncherSignature, slots: Sequence) -> int | None:
    """The first parameter a None fills that takes none, or None."""
    for i, (p, slot) in enumerate(zip(sig.params, slots)):
        if slot.kind == SlotKind.NONE and _takes_no_none(p):
            return i
    return None
