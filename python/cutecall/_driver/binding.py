"""Binding one call to a launcher's parameters: the call's positional
arguments fill the parameters that are neither the stream nor outputs, in
the launcher's order, wherever the outputs sit (``outputs.placement``);
keyword arguments carry runtime scalars; ``None`` is an absent optional;
``cutlass.Constexpr`` parameters the launcher was not given may take
positional compile-time values. :func:`bind` decides which parameter each
argument fills and returns a :class:`~slots.Binding` (``slots``); the
arguments themselves are read by ``binding_builder``. Pure Python, no CuTe
DSL import.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

from .binding_builder import BindingBuilder, default_is_array
from .outputs.candidates import VALUE, arg_kind, placements, probe_rank
from .outputs.placement import (NO_EVIDENCE, Evidence, named_outputs, place_outputs,
                                place_written, written_params)
from .scalars import concrete_scalar
from .signature import CONSTEXPR, SCALAR, STREAM, TENSOR, LauncherSignature
from .slots import DEFAULT_SLOT, STREAM_SLOT, Binding, Slot, SlotKind


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
        return BindingBuilder(sig, call.scalar_value, call.is_array).bind_uninspected(
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
    b = BindingBuilder(sig, call.scalar_value, call.is_array)
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


def output_positions(sig: LauncherSignature, open_params: Sequence[int],
                     args: Sequence[Any], num_outputs: int, order: str,
                     output_names: Sequence[str] | None = None,
                     evidence: Evidence = NO_EVIDENCE) -> tuple[int, ...]:
    """Where the outputs sit among the open parameters: where `output_names`
    says; else among the parameters the kernel writes (``evidence.written``)
    when the call fits them (``placement.place_written``); else by the rule
    (``placement.place_outputs``), or, when the rule's placement is in
    ``evidence.avoid`` (its trace failed, or wrote elsewhere), the next best
    placement (``candidates.probe_rank``), one sharing no position with
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
