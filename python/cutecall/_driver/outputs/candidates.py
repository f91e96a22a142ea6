"""The placements of a call's outputs that the call fits, and how each
ranks: the kind of each call argument (:func:`arg_kind`: an array, a
scalar, ``None``, a container, a compile-time value), which parameters a
kind fits (:func:`fits`), every placement with its score
(:func:`placements`), the one by position (:func:`by_position`) and the rank
of a placement tried after the rule's failed (:func:`probe_rank`).
``placement`` chooses among them. Pure Python.
"""

from __future__ import annotations

import itertools
from typing import Sequence

from ..scalars import SCALAR_TYPES, is_scalar_value
from ..signature import CONSTEXPR, SCALAR, TENSOR, LauncherSignature, Param

# A call argument's kind, for placing outputs.
ARRAY, SCALAR_ARG, NONE_ARG = "array", "scalar", "none"
# A container of arrays and scalars (QuACK's EpilogueArguments, a plain
# tuple): never a parameter annotated ``cute.Tensor`` (one annotated as a
# NamedTuple of tensors, FA4's BlockSparseTensors, takes it).
CONTAINER = "container"
# Anything else -- a configuration object, a callable (an epilogue lambda):
# a compile-time value, for a ``cutlass.Constexpr`` parameter.
VALUE = "value"
# Placements tried before giving up (C(20, 10) would be 184,756).
_MAX_PLACEMENTS = 20000


def arg_kind(x) -> str:
    """A 0-d array counts as a scalar (cutecall has no rank-0 tensors: a
    runtime scalar parameter takes it, or says why a traced one cannot), as
    does a CuTe DSL value (``cutlass.Float32(1.0)``)."""
    if x is None:
        return NONE_ARG
    if is_scalar_value(x) or tuple(getattr(x, "shape", (1,))) == () or \
            (type(x).__module__.startswith("cutlass") and type(x).__name__ in SCALAR_TYPES):
        return SCALAR_ARG
    if isinstance(x, (tuple, list, dict)) and not hasattr(x, "shape"):
        return CONTAINER
    if not hasattr(x, "shape") and (callable(x) or not hasattr(x, "__dataclass_fields__")):
        return VALUE
    return ARRAY


def fits(p: Param, kind: str) -> bool:
    if p.kind == CONSTEXPR:  # compiled in: a value, a number, None
        return kind in (VALUE, SCALAR_ARG, NONE_ARG)
    if kind == VALUE:  # elsewhere it fits as an array would (and says why not)
        kind = ARRAY
    if kind == SCALAR_ARG:
        return p.kind == SCALAR or (p.kind == TENSOR and not p.annotated)
    if kind == ARRAY:
        return p.kind != SCALAR
    if kind == CONTAINER:
        return p.kind != SCALAR and (not p.annotated or p.container is not None)
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


def probe_rank(order: str, outs, open_params: Sequence[int], kinds: Sequence[str]) -> tuple:
    """How a placement ranks among those tried after the rule's did not
    compile (lower first): the arrays on the wrong side of the outputs,
    then the ``None`` arguments before the last output -- an absent
    ``Optional`` says nothing about order, and callers leave the trailing
    ones out. FA4's backward preprocess ``(mO, mdO, mPdPsum, mLSE,
    mLSElog2, mdQaccum, <5 Optional>, scale)`` called ``(o, do, lse, None
    x5, 1.0)``: the outputs right after ``lse`` come first; that placement
    traces, and its trace shows where the kernel writes."""
    if not outs:
        return (0, 0)
    placed = list(zip([i for i in open_params if i not in outs], kinds))
    if order == "inputs_first":
        arrays = sum(k == ARRAY and i > min(outs) for i, k in placed)
    else:
        arrays = sum(k == ARRAY and i < max(outs) for i, k in placed)
    return arrays, sum(k == NONE_ARG and i < max(outs) for i, k in placed)


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
        if not all(fits(params[i], k) for i, k in zip(rest, given)):
            continue
        yield (score(order, outs, rest, given, params) if outs else (0,)), outs


def by_position(sig: LauncherSignature, open_params: Sequence[int],
                kinds: Sequence[str], num_outputs: int, order: str):
    """The outputs' positions when the call reads positionally: with
    ``inputs_first``, the arguments up to the last array or ``None`` fill
    the first open parameters, the outputs the next `num_outputs` (all
    tensor parameters), trailing scalars the ones after; with
    ``outputs_first`` the outputs take the first open parameters and the
    arguments the rest. ``None`` when that leaves a parameter without a
    default empty or puts a value where its kind does not go."""
    params = sig.params
    if order == "inputs_first":
        head = max((i + 1 for i, k in enumerate(kinds) if k != SCALAR_ARG), default=0)
        outs = list(open_params[head:head + num_outputs])
        rest = list(open_params[:head]) + list(open_params[head + num_outputs:])
    else:
        outs = list(open_params[:num_outputs])
        rest = list(open_params[num_outputs:])
    if len(outs) < num_outputs or len(kinds) > len(rest):
        return None
    if not all(params[i].kind == TENSOR for i in outs):
        return None
    if not all(fits(params[i], k) for i, k in zip(rest, kinds)):
        return None
    if any(not params[i].has_default for i in rest[len(kinds):]):
        return None
    return tuple(outs)
