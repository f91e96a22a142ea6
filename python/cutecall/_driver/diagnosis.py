"""A failed compile explained in terms of the call: which argument, with
which dtype and shape, most likely made the kernel fail.

The DSL reports a mismatched dtype as ``'cute.copy' op ... cannot vectorize
copy`` and a mismatched rank as ``'cute.elem_less' op expects inputs that
are congruent`` (or as the launcher's own ``not enough values to unpack``):
true, but silent about the argument. A kernel's annotations (``cute.Tensor``)
carry no dtype or rank, so nothing can be refused before the first compile;
what is known is the call itself and the calls of the same launcher that
compiled before. :func:`explain` turns both into one sentence naming the
argument and its value, which :func:`annotate` puts on the error's first
line, followed by every array of the call.

Example (a ``float32`` kernel called with a ``bfloat16`` ``b``)::

    cutecall: kernel 'vector_add' failed to compile for sm_90a: argument 'b'
    is bfloat16[4096] but 'a', 'c' are float32 (the call's arrays differ in
    dtype); the DSL says: 'cute.copy' op ... cannot vectorize copy ...
"""

from __future__ import annotations

import collections
import re
from typing import Sequence

from . import dtypes
from .compile_error import CompileError


def shown(op) -> str:
    """``float32[4096, 8]`` for an operand description."""
    return f"{dtypes.dtype_name(op.dtype)}{list(op.shape)}"


class CallHistory:
    """What each argument (by operand name) was in the calls of one
    launcher that compiled: {name: {(dtype, rank)}}."""

    def __init__(self):
        self.seen: dict[str, set] = {}

    def record(self, operands: Sequence) -> None:
        for op in operands:
            self.seen.setdefault(op.name, set()).add(
                (dtypes.dtype_name(op.dtype), len(op.shape)))

    def differs(self, op) -> str:
        """How `op` differs from every earlier call's argument of its name,
        or "" (first call, or it matches one)."""
        earlier = self.seen.get(op.name)
        here = (dtypes.dtype_name(op.dtype), len(op.shape))
        if not earlier or here in earlier:
            return ""
        if any(r == here[1] for _, r in earlier):
            was = sorted({d for d, r in earlier if r == here[1]})
            return f"earlier calls that compiled passed {' or '.join(was)}"
        ranks = sorted({r for _, r in earlier})
        return f"earlier calls that compiled passed rank {' or '.join(map(str, ranks))}"


def _odd_one(operands: Sequence, key, what: str) -> str:
    """'argument b is bfloat16[4096] but a, c are float32 (...)' when one
    value of `key` is shared by most arrays and others differ."""
    groups = collections.defaultdict(list)
    for op in operands:
        groups[key(op)].append(op)
    if len(groups) < 2:
        return ""
    common, members = max(groups.items(), key=lambda kv: len(kv[1]))
    odd = [op for op in operands if key(op) != common]
    names = ", ".join(f"'{op.name}'" for op in members)
    verb = "is" if len(members) == 1 else "are"
    odd_text = ", ".join(f"'{op.name}' is {shown(op)}" for op in odd)
    return f"argument {odd_text} but {names} {verb} {_value(common, what)} " \
           f"(the call's arrays differ in {what})"


def _value(v, what: str) -> str:
    return f"rank {v}" if what == "rank" else str(v)


# Words of the DSL's (or the launcher's) messages for a dtype or a rank
# mismatch: many kernels mix dtypes and ranks on purpose, so the call's own
# arrays are named only when the failure reads like one of these.
_DTYPE_WORDS = ("copy", "vectoriz", "type", "element", "dtype")
_RANK_WORDS = ("congruent", "unpack", "rank", "coord", "mode", "index")


_COORD = re.compile(r'!cute\.coord<"([^"]*)">')


def coordinate_ranks(cause: str) -> list[int]:
    """The ranks of the CuTe coordinates a DSL message compares
    (``'!cute.coord<"(?{div=4},?)">'`` is rank 2, ``"(?)"`` and ``"?"``
    rank 1), in order."""
    ranks = []
    for text in _COORD.findall(cause):
        text = text.strip()
        if not (text.startswith("(") and text.endswith(")")):
            ranks.append(1)
            continue
        depth, n = 0, 1
        for ch in text[1:-1]:
            depth += ch in "({[" and 1 or (ch in ")}]" and -1 or 0)
            n += ch == "," and depth == 0
        ranks.append(n)
    return ranks


def _rank_of_coordinates(operands: Sequence, cause: str) -> str:
    """'arguments 'a', 'b', 'c' are rank 2 (...); the kernel compares ...'
    when the call's arrays share one rank and the DSL compares coordinates
    of that rank with coordinates of another: the kernel indexes arrays of
    the other rank (a 1-D kernel given 2-D arrays, on its first call)."""
    ranks = coordinate_ranks(cause)
    here = {len(op.shape) for op in operands}
    if len(set(ranks)) != 2 or len(here) != 1 or not here <= set(ranks):
        return ""
    rank = here.pop()
    other = next(r for r in ranks if r != rank)
    names = ", ".join(f"'{op.name}'" for op in operands)
    what = "argument" if len(operands) == 1 else "arguments"
    verb = "is" if len(operands) == 1 else "are"
    values = {shown(op) for op in operands}
    value = values.pop() if len(values) == 1 else \
        ", ".join(f"{op.name} {shown(op)}" for op in operands)
    return (f"{what} {names} {verb} rank {rank} ({value}) but the "
            f"kernel compares rank-{rank} coordinates with rank-{other} ones: "
            f"it likely takes rank-{other} arrays")


_UNPACK = re.compile(r"(not enough|too many) values to unpack \(expected (\d+)(?:, got (\d+))?\)")


def _rank_of_unpack(operands: Sequence, cause: str, source_line: str) -> str:
    """'argument 'out' is rank 1 (float32[8]) but the kernel unpacks 2
    extents from its shape: ...' when the launcher unpacked a shape of the
    call's one rank into another number of extents (a 2-D kernel given 1-D
    arrays, on its first call). Names the arrays the failing line unpacks
    (`source_line`, when it is the user's), else every array."""
    m = _UNPACK.search(cause)
    here = {len(op.shape) for op in operands}
    if m is None or len(here) != 1:
        return ""
    rank, want = here.pop(), int(m.group(2))
    if (m.group(3) is not None and int(m.group(3)) != rank) or \
            (rank < want) != (m.group(1) == "not enough"):
        return ""
    named = [op for op in operands
             if re.search(rf"\b{re.escape(op.name)}\.shape\b", source_line)] or operands
    what = "argument" if len(named) == 1 else "arguments"
    verb = "is" if len(named) == 1 else "are"
    values = {shown(op) for op in named}
    value = values.pop() if len(values) == 1 else \
        ", ".join(f"{op.name} {shown(op)}" for op in named)
    names = ", ".join(f"'{op.name}'" for op in named)
    return (f"{what} {names} {verb} rank {rank} ({value}) but the kernel "
            f"unpacks {want} extents from a shape: it likely takes rank-{want} arrays")


def explain(operands: Sequence, history: CallHistory | None = None,
            cause: str = "", source_line: str = "") -> str:
    """One sentence naming the argument that most likely made the compile
    fail (`cause`: the failure's root cause; `source_line`: the user's line
    where it failed, if known), or "" when nothing stands out."""
    if history is not None:
        for op in operands:
            why = history.differs(op)
            if why:
                return f"argument '{op.name}' is {shown(op)}; {why}"
    lowered = cause.lower()
    if any(w in lowered for w in _RANK_WORDS):
        why = _odd_one(operands, lambda op: len(op.shape), "rank") or \
            _rank_of_coordinates(operands, cause) or \
            _rank_of_unpack(operands, cause, source_line)
        if why:
            return why
    if any(w in lowered for w in _DTYPE_WORDS):
        return _odd_one(operands, lambda op: dtypes.dtype_name(op.dtype), "dtype")
    return ""


def annotate(error: CompileError, operands: Sequence,
             history: CallHistory | None = None) -> CompileError:
    """`error` with the call's arguments: the likely culprit on its first
    line (:func:`explain`), every array on the next."""
    text = str(error)
    head, _, rest = text.partition("\n")
    why = explain(operands, history, error.root_cause, error.source_line or "")
    prefix = error.head()
    if why and head.startswith(prefix):
        head = f"{prefix}{why}; the DSL says: {head[len(prefix):]}"
    arrays = "  arrays: " + ", ".join(
        f"{op.name} {shown(op)}" + (" (output)" if op.source else "") for op in operands)
    out = error.with_message("\n".join([head, arrays] + ([rest] if rest else [])))
    out.explanation = why
    return out
