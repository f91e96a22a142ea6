"""MLIR's generic form, read as text: the ops of a printed module.

``mlir_writes`` follows tensors through a module the DSL traced; this
module reads its printed text (``get_asm(print_generic_op_form=True)``)
into :class:`Op` records: each op's name, results, operands, the blocks
of its regions with their arguments, what its regions yield, the function
it calls, and the scope its names live in (a function's). An op's types
are read from its signature only when asked (:meth:`Op.typed`): most ops
of a kernel never carry a tensor, and reading every signature was most of
the analysis's time. No CuTe DSL import.
"""

from __future__ import annotations

import re


class Op:
    """One op of the printed module: its name, line and scope (the function
    whose names it uses), results as (key, type), operand keys, per block
    its arguments as (key, type), per terminator of its regions the keys it
    yields, the function it calls, and the scope inside its regions."""

    __slots__ = ("name", "line", "scope", "results", "operands", "operand_types",
                 "blocks", "yields", "callee", "inner", "tail")

    def __init__(self, name: str, line: str, scope: int, operands: list):
        self.name, self.line, self.scope, self.operands = name, line, scope, operands
        self.results, self.operand_types, self.blocks, self.yields = [], [], [], []
        self.callee = None
        self.inner = 0           # the scope of names inside its regions
        self.tail = None         # the text after the operands, until typed

    def typed(self) -> "Op":
        """Reads the result types from the op's trailing signature, once:
        most ops never carry memory, so most never need them (reading every
        signature was most of the analysis's time)."""
        if self.tail is not None:
            self.operand_types, types = _signature(self.tail)
            self.results = [(k, t) for (k, _), t in
                            zip(self.results, types + [""] * len(self.results))]
            self.tail = None
        return self

    def input_types(self) -> list:
        """The operand types (read once, when asked)."""
        self.typed()
        if isinstance(self.operand_types, str):
            self.operand_types = _split(self.operand_types)
        return self.operand_types


# Ops whose regions are a function's body: a scope of names of their own.
FUNCTIONS = ("func.func", "cuda.kernel", "gpu.func", "llvm.func")
_OP = re.compile(r'^(?:(%[^=]+?) = )?"([\w.$-]+)"\((.*?)\)')
_NAME = re.compile(r"%[\w.$-]+(?:#\d+)?")


# What `_split` stops at: a quoted string (skipped whole), ``->`` (no
# bracket), an opening or closing bracket, or the separator.
_TOKENS = {sep: re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)|->|[<(\[{>)\]}]|' + sep)
           for sep in ",:"}
_OPEN, _CLOSE = frozenset("<([{"), frozenset(">)]}")


def _split(text: str, sep: str = ",") -> list[str]:
    """`text` split at top-level `sep` (outside <>, (), [], {} and quotes).
    The regular expression hops from one bracket, quote or separator to the
    next: a module's long attributes cost no Python step per character."""
    parts, depth, start = [], 0, 0
    for m in _TOKENS[sep].finditer(text):
        tok = m.group()
        if tok in _OPEN:
            depth += 1
        elif tok in _CLOSE:
            depth -= 1
        elif tok == sep and depth == 0:
            parts.append(text[start:m.start()].strip())
            start = m.end()
    last = text[start:].strip()
    if last:
        parts.append(last)
    return parts


def _signature(text: str) -> tuple[str, list]:
    """(operand types, not yet split; result types) of an op line's
    trailing ``: (ins) -> outs``."""
    parts = _split(text, ":")
    sig = parts[-1] if len(parts) > 1 else ""
    if "->" not in sig:
        return "", []
    ins, _, outs = sig.partition("->") if not sig.startswith("(") else \
        _close(sig)
    ins = ins.strip()
    if ins.startswith("(") and ins.endswith(")"):
        ins = ins[1:-1]
    outs = outs.strip()
    if outs.startswith("(") and outs.endswith(")"):
        outs = outs[1:-1]
    return ins, _split(outs)


def _close(sig: str) -> tuple[str, str, str]:
    """``(a, b) -> c`` split after the parenthesis that closes the first."""
    depth = 0
    for m in _PARENS.finditer(sig):
        depth += 1 if m.group() == "(" else -1
        if depth == 0:
            i = m.start()
            rest = sig[i + 1:].strip()
            return sig[:i + 1], "->", rest[2:] if rest.startswith("->") else rest
    return sig, "->", ""


_PARENS = re.compile(r"[()]")


def _results(spec: str, scope: int) -> list:
    """The result keys of ``%a, %b:2 = ...`` (``%b#0``, ``%b#1``)."""
    if "," not in spec and ":" not in spec:
        return [(scope, spec)]
    out = []
    for part in spec.split(","):
        name, _, count = part.strip().partition(":")
        if count:
            out += [(scope, f"{name}#{i}") for i in range(int(count))]
        else:
            out.append((scope, name))
    return out


def parse(text: str) -> tuple[list, dict, dict]:
    """(ops, type aliases, functions: symbol -> (scope, params)) of a module
    printed in MLIR's generic form. An op's types are read when the
    analysis needs them (:meth:`Op.typed`)."""
    aliases, ops, functions, stack = {}, [], {}, []
    scopes = scope = 0
    match, names = _OP.match, _NAME.findall
    for line in text.splitlines():
        line = line.strip()
        first = line[:1]
        if first == "!" and not stack and " = " in line:
            name, _, value = line.partition(" = ")
            aliases[name] = value
        elif first == "^":  # a block and its arguments
            if stack:
                _block(stack[-1], line)
        elif first == "}":
            if line.startswith("})") and stack:
                _close_region(stack.pop(), line)
                scope = stack[-1].inner if stack else 0
        elif first == '"' or first == "%":
            m = match(line)
            if not m:
                continue
            op = Op(m.group(2), line, scope, [(scope, n) for n in names(m.group(3))])
            if "callee = " in line:
                callee = _CALLEE.search(line)
                op.callee = callee.group(1).rsplit("@", 1)[-1] if callee else None
            results = _results(m.group(1), scope) if m.group(1) else []
            op.results = [(k, "") for k in results]
            if line.endswith("({"):
                scopes = _open_region(op, functions, scopes)
                stack.append(op)
                scope = op.inner
            else:
                op.tail = line[m.end():]
            if stack and stack[-1] is not op and \
                    (op.name.endswith("yield") or op.name == "scf.condition"):
                stack[-1].yields.append(op.operands[1:] if op.name == "scf.condition"
                                        else op.operands)
            ops.append(op)
    return ops, aliases, functions


_CALLEE = re.compile(r"callee = (@[\w$.:@]+)")
_SYM_NAME = re.compile(r'sym_name = "([^"]+)"')


def _block(op: Op, line: str) -> None:
    """A block of `op`'s regions (``^bb0(%a: T, ...)``): its arguments."""
    inner = line[line.find("(") + 1:line.rfind(")")] if "(" in line else ""
    op.blocks.append([((op.inner, name.strip()), typ.strip()) for name, _, typ in
                      (arg.partition(":") for arg in _split(inner))])


def _open_region(op: Op, functions: dict, scopes: int) -> int:
    """An op whose regions follow: a function opens a scope of names (and
    is recorded by symbol); others keep their parent's. Returns the number
    of scopes."""
    op.inner = op.scope
    if op.name in FUNCTIONS:
        scopes += 1
        op.inner = scopes
        sym = _SYM_NAME.search(op.line)
        functions[sym.group(1) if sym else f"?{scopes}"] = op
    return scopes


def _close_region(op: Op, line: str) -> None:
    """The line closing `op`'s regions holds its signature: its result
    types."""
    types = _signature(line[2:])[1]
    op.results = [(k, t) for (k, _), t in zip(op.results, types + [""] * len(op.results))]
