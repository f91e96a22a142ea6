"""Where a call's outputs sit among a launcher's parameters.

The rule, the same in every front. First, by position: the call's
positional arguments fill the open parameters in order up to its last array
(or ``None``), the outputs take the next tensor parameters, and trailing
runtime scalars the ones after -- ``cutlass_call``'s own convention
(``launcher(*inputs, *outputs)``), and how FA4 calls its split-KV combine
(``combine(out_partial, lse_partial, out, lse=None, ...)``). When that does
not fit (a parameter without a default left empty, a scalar where a tensor
goes), by rank: outputs are tensor parameters (never one
annotated as a runtime scalar) and, where possible, ones without a default
and not ``Optional``; they follow the last array argument
(``operand_order="inputs_first"``, the convention of QuACK, FA4 and
CUTLASS: inputs, outputs, then scalars) or precede the first
(``"outputs_first"``); runtime scalars bind after the outputs unless an
annotation (``eps: cutlass.Float32``) places them before. A scalar never
lands in a parameter annotated as a tensor, nor an array in one annotated as
a scalar. When two placements are equally good the call is ambiguous: a
``TypeError`` names the parameters and values, and says how to
disambiguate (annotate, or pass by keyword).

Here: the rule (:func:`place_outputs`), outputs named by the call
(:func:`named_outputs`), and placements among the parameters a trace saw
written (:func:`place_written`, :func:`written_params`), with what a
placement question has learned (:class:`Evidence`); the placements a
call fits and their ranks are ``candidates``'. Pure Python.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Sequence

from .candidates import by_position, fits, placements
from ..scalars import is_scalar_value
from ..signature import TENSOR, LauncherSignature


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a placement question has learned so far (``stage``): the
    parameters a trace saw written (`written`; `in_leaves`: those written
    only through a leaf of a container), placements (tuples of parameter
    positions) not to use again, and one to keep apart from: the next
    placement shares none of its positions when one such fits."""

    written: frozenset | None = None
    in_leaves: frozenset = frozenset()
    avoid: frozenset = frozenset()
    apart_from: tuple = ()


NO_EVIDENCE = Evidence()


def place_outputs(sig: LauncherSignature, open_params: Sequence[int],
                  kinds: Sequence[str], num_outputs: int, order: str,
                  values: Sequence[Any] = ()) -> tuple[int, ...]:
    """The positions (indices into ``sig.params``) of the outputs, given the
    open parameters (those the call fills), the kinds of the call's
    positional arguments and the number of outputs. Raises ``TypeError``
    when no binding fits or two fit equally well."""
    positional = by_position(sig, open_params, kinds, num_outputs, order)
    if positional is not None:
        return positional
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
            if all(fits(params[i], k) for i, k in zip(rest, kinds)):
                missing = next(params[i].name for i in rest[n:]
                               if not params[i].has_default)
                raise TypeError(
                    f"cutecall: launcher '{sig.name}' parameter {missing!r} "
                    f"receives no value: the call passes {n} positional "
                    f"argument(s) ({shown}) and {num_outputs} output(s) for "
                    f"parameters ({', '.join(names)})")
    if best is None:
        _refuse_rank0(sig, names, values)
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


def _refuse_rank0(sig: LauncherSignature, names: Sequence[str],
                  values: Sequence[Any]) -> None:
    """A rank-0 array among the arguments is the usual reason no binding
    fits: a CuTe tensor has rank >= 1, and a runtime scalar is a number."""
    for k, v in enumerate(values):
        if getattr(v, "shape", None) == () and hasattr(v, "dtype"):
            param = f" (parameter {names[k]!r})" if k < len(names) else ""
            raise TypeError(
                f"cutecall: launcher '{sig.name}': positional argument {k}{param} "
                f"is a rank-0 array ({v.dtype}[]). A tensor parameter needs rank "
                ">= 1: pass x.reshape(1). A runtime scalar is a Python number or "
                "a CuTe DSL value (cutlass.Float32(x)); inside jax.jit a traced "
                "value cannot be one: close over it or pass it as a shape-(1,) array.")


def _show(v) -> str:
    if v is None or is_scalar_value(v):
        return repr(v)
    shape = getattr(v, "shape", None)
    dtype = getattr(v, "dtype", None)
    return f"{dtype}{list(shape)}" if shape is not None else type(v).__name__


def named_outputs(sig, open_params, names, num_outputs) -> tuple[int, ...]:
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


def written_params(sig: LauncherSignature, open_params: Sequence[int],
                   num_outputs: int, name: str,
                   written: frozenset | None = None,
                   in_leaves: frozenset = frozenset()) -> list[str]:
    """The `num_outputs` parameters a launch object's kernel writes, placed
    by the rule for a call that passes a value of its annotated kind to
    every other parameter without a default (torch's ``kernel(outputs=n)``),
    among the parameters a trace saw written when `written` names them
    (:func:`place_written`; `in_leaves`: those written only through a leaf
    of a container, ranked last)."""
    params = sig.params
    required = [i for i in open_params if not params[i].has_default]
    if written:
        found = place_written(sig, open_params, None, num_outputs, "inputs_first",
                              written, in_leaves=in_leaves)
        if found is not None:
            return [params[i].name for i in found]
    found = list(placements(sig, required, None, num_outputs, "inputs_first"))
    if not found:
        tensors = [params[i].name for i in open_params if params[i].kind == TENSOR]
        raise ValueError(f"cutecall: launcher '{name}' has {len(tensors)} tensor "
                         f"parameters without defaults, fewer than "
                         f"outputs={num_outputs}")
    best = min(found, key=lambda placement: placement[0])[1]
    return [params[i].name for i in best]


def place_written(sig: LauncherSignature, open_params: Sequence[int],
                  kinds: Sequence[str] | None, num_outputs: int, order: str,
                  written: frozenset, values: Sequence[Any] = (),
                  in_leaves: frozenset = frozenset()) -> tuple[int, ...] | None:
    """The outputs' positions among the parameters the kernel writes
    (`written`: parameter names, ``written_params``): the rule's placement
    when its outputs are all written, else the best placement the call fits
    whose outputs are (ranked as :func:`place_outputs` ranks, after the
    number of outputs among `in_leaves`). ``None`` when none is (the
    evidence says nothing: the rule decides). `kinds`: as for
    :func:`placements`. Raises ``TypeError`` when two fit equally well.
    The rule's placement stands only when none of its outputs is in
    `in_leaves`.

    `in_leaves`: written parameters the trace saw written only through a
    leaf (``epilogue_args.mAuxOut``): containers. An output is a tensor, so
    a placement with fewer of them ranks first: QuACK's symmetric GEMM
    writes ``mD`` and ``epilogue_args.mAuxOut`` (D^T, a view of D), and its
    one output is ``mD``, though the convention (inputs, outputs, then the
    rest) would rank ``epilogue_args``, later in the signature, first."""
    params = sig.params
    if kinds is not None:
        rule = by_position(sig, open_params, kinds, num_outputs, order)
        if rule is not None and all(params[i].name in written for i in rule) and \
                not any(params[i].name in in_leaves for i in rule):
            return rule
    found = [((sum(params[i].name in in_leaves for i in outs),) + s, outs)
             for s, outs in placements(sig, open_params, kinds, num_outputs, order)
             if all(params[i].name in written for i in outs)]
    if not found:
        return None
    best = min(s for s, _ in found)
    ties = [outs for s, outs in found if s == best]
    if len(ties) > 1:
        shown = ", ".join(_show(v) for v in values) if values else \
            f"{len(kinds or ())} argument(s)"
        options = "; ".join("outputs " + ", ".join(params[i].name for i in o)
                            for o in ties[:4])
        raise TypeError(
            f"cutecall: launcher '{sig.name}' writes parameters "
            f"{', '.join(sorted(written))}, and the call ({shown}) with "
            f"{num_outputs} output(s) fits more than one way among them "
            f"({options}). Name the outputs: output_params=(...) in JAX, "
            "outputs=(...) in torch.")
    return ties[0]
