"""Which tensor operands a traced kernel writes, read from MLIR text.

The DSL traces cutecall's entry point (``wrapper.cutecall_entry``) into an
MLIR module before any pass runs. In it every tensor operand enters the
host function as one ``!cute.ptr`` argument (operand k is the k-th pointer:
``docs/abi.md``). :func:`analyze` prints the module in MLIR's generic form
and follows each pointer through the values that carry global memory
(pointers, tensors, copy atoms, TMA descriptors and their coordinate
tensors; never layouts, shapes, numbers, or shared/register memory), into
kernels through their launches (``cuda.launch_ex``) and calls, and through
``scf`` regions position by position; then records the operands that
reach the destination of a store, a copy, an MMA accumulator, an atomic or
a TMA store/reduce.

The evidence is three sets of operand indices (:class:`Writes`): ``written``
(a write op's destination), ``maybe`` (a pointer reaching inline PTX that
stores -- ``llvm.inline_asm``, ``nvvm.inline_ptx`` -- or a call the module
has no body for) and ``unattributed`` (storing inline PTX whose address is
no longer a pointer: any tensor may be written). Text only: the DSL's value
casters turn some ``ir.Value`` objects into ones whose construction is not
safe outside a trace, so the walk never touches them. No CuTe DSL import.
"""

from __future__ import annotations

import dataclasses
import re

# Types that never carry memory: numbers, and CuTe's layout algebra.
_NOT_MEMORY = re.compile(
    r"^(i\d+|ui\d+|si\d+|f\d+|bf16|tf32|index|vector<|none|!cute\.(layout|shape|"
    r"stride|coord|int_tuple|tile|swizzle|composed_layout|basis|static|tuple)\b)")
# Shared memory, registers and tensor memory: no global tensor flows there.
_ON_CHIP = re.compile(r"^!cute\.(memref|ptr)<[^,]+, (smem|rmem|tmem)\b")
# Ops writing every memory operand they take (a value stored is a number).
_STORES = re.compile(r"(^|\.)(store|store_vec|atomic\w*|red|cas|exch)\b|"
                     r"\.atomicrmw$|\.atomic_|\.store$|tma_(store|reduce)")
# Inline PTX that writes global memory.
_PTX_WRITE = re.compile(r"\b(st|red|atom|cp\.reduce|cp\.async\.bulk\.global|"
                        r"cp\.async\.bulk\.tensor\.\dd\.global|multimem\.st|"
                        r"multimem\.red)\.")


@dataclasses.dataclass(frozen=True)
class Writes:
    """Operand indices a trace writes (module docstring)."""

    written: frozenset = frozenset()
    maybe: frozenset = frozenset()
    unattributed: bool = False


@dataclasses.dataclass
class _Op:
    name: str
    line: str
    scope: int
    results: list = dataclasses.field(default_factory=list)   # (key, type)
    operands: list = dataclasses.field(default_factory=list)  # keys
    operand_types: list = dataclasses.field(default_factory=list)
    blocks: list = dataclasses.field(default_factory=list)    # per block: args (key, type)
    yields: list = dataclasses.field(default_factory=list)    # per terminator: operand keys
    callee: str | None = None
    inner: int = 0         # the scope of names inside its regions


_FUNCTIONS = ("func.func", "cuda.kernel", "gpu.func", "llvm.func")
_OP = re.compile(r'^(?:(%[^=]+?) = )?"([\w.$-]+)"\((.*?)\)')
_NAME = re.compile(r"%[\w.$-]+(?:#\d+)?")


def _split(text: str, sep: str = ",") -> list[str]:
    """`text` split at top-level `sep` (outside <>, (), [], {} and quotes)."""
    parts, depth, quoted, cur = [], 0, False, []
    prev = ""
    for ch in text:
        if quoted:
            quoted = not (ch == '"' and prev != "\\")
        elif ch == '"':
            quoted = True
        elif ch in "<([{":
            depth += 1
        elif ch in ">)]}" and not (ch == ">" and prev == "-"):
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur, prev = [], ch
            continue
        cur.append(ch)
        prev = ch
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _signature(text: str) -> tuple[list, list]:
    """(operand types, result types) of an op line's trailing
    ``: (ins) -> outs``."""
    parts = _split(text, ":")
    sig = parts[-1] if len(parts) > 1 else ""
    if "->" not in sig:
        return [], []
    ins, _, outs = sig.partition("->") if not sig.startswith("(") else \
        _close(sig)
    ins = ins.strip()
    if ins.startswith("(") and ins.endswith(")"):
        ins = ins[1:-1]
    outs = outs.strip()
    if outs.startswith("(") and outs.endswith(")"):
        outs = outs[1:-1]
    return _split(ins), _split(outs)


def _close(sig: str) -> tuple[str, str, str]:
    """``(a, b) -> c`` split after the parenthesis that closes the first."""
    depth = 0
    for i, ch in enumerate(sig):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            rest = sig[i + 1:].strip()
            return sig[:i + 1], "->", rest[2:] if rest.startswith("->") else rest
    return sig, "->", ""


def _results(spec: str | None, scope: int) -> list:
    if not spec:
        return []
    out = []
    for part in spec.split(","):
        part = part.strip()
        name, _, count = part.partition(":")
        if count:
            out += [(scope, f"{name}#{i}") for i in range(int(count))]
        else:
            out.append((scope, name))
    return out


def parse(text: str) -> tuple[list, dict, dict]:
    """(ops, type aliases, functions: symbol -> (scope, params)) of a module
    printed in MLIR's generic form."""
    aliases, ops, functions, stack = {}, [], {}, []
    scopes = 0
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("!") and " = " in line and not stack:
            name, _, value = line.partition(" = ")
            aliases[name] = value
            continue
        if line.startswith("^"):  # a block and its arguments
            if stack:
                op = stack[-1]
                inner = line[line.find("(") + 1:line.rfind(")")] if "(" in line else ""
                op.blocks.append([((op.inner, name.strip()), typ.strip()) for name, _, typ in
                                  (arg.partition(":") for arg in _split(inner))])
            continue
        if line.startswith("})") or line.startswith("}, {"):
            if line.startswith("})") and stack:
                op = stack.pop()
                types = _signature(line[2:])[1]
                op.results = [(k, t) for (k, _), t in
                              zip(op.results, types + [""] * len(op.results))]
            continue
        m = _OP.match(line)
        if not m:
            continue
        scope = stack[-1].inner if stack else 0
        op = _Op(m.group(2), line, scope)
        op.operands = [(scope, n) for n in _NAME.findall(m.group(3))]
        callee = re.search(r"callee = (@[\w$.:@]+)", line)
        op.callee = callee.group(1).rsplit("@", 1)[-1] if callee else None
        results = _results(m.group(1), scope)
        if line.endswith("({"):
            op.inner = scope
            if op.name in _FUNCTIONS:
                scopes += 1
                op.inner = scopes
                sym = re.search(r'sym_name = "([^"]+)"', line)
                functions[sym.group(1) if sym else f"?{scopes}"] = op
            op.results = [(k, "") for k in results]
            stack.append(op)
        else:
            op.operand_types, types = _signature(line[m.end():])
            op.results = list(zip(results, types + [""] * len(results)))
        if op.name.endswith("yield") or op.name == "scf.condition":
            if stack and stack[-1] is not op:
                stack[-1].yields.append(op.operands[1:] if op.name == "scf.condition"
                                        else op.operands)
        ops.append(op)
    return ops, aliases, functions


# Copies whose first operands are (src, dst); ``cute.copy`` and
# ``cute.copy_atom_call`` take the atom first.
_SRC_DST_COPIES = ("lir.copy", "lir.simt_auto_vec_copy", "cuda.memory.copy",
                   "cuda.memory.copy_async")


def _segment(op: _Op, k: int) -> list:
    """Operand group `k` of `op` (``operandSegmentSizes``, or one operand
    per group when the op has none)."""
    sizes = re.search(r"operandSegmentSizes = array<i32: ([\d, ]+)>", op.line)
    if sizes is None:
        return op.operands[k:k + 1]
    counts = [int(c) for c in sizes.group(1).split(",")]
    start = sum(counts[:k])
    return op.operands[start:start + counts[k]] if k < len(counts) else []


def _memory(typ: str, aliases: dict) -> bool:
    for _ in range(4):
        if typ in aliases:
            typ = aliases[typ]
    return bool(typ) and not _NOT_MEMORY.match(typ) and not _ON_CHIP.match(typ)


class _Flow:
    """Origins (operand indices) per SSA value, propagated to a fixed point."""

    def __init__(self, ops, aliases, functions):
        self.ops, self.aliases, self.functions = ops, aliases, functions
        self.origin: dict = {}
        self.writes: set = set()
        self.maybe: set = set()
        self.unattributed = False

    def get(self, key) -> frozenset:
        return self.origin.get(key, frozenset())

    def union(self, keys) -> frozenset:
        return frozenset().union(*(self.get(k) for k in keys)) if keys else frozenset()

    def add(self, key, typ, origins) -> bool:
        if not origins or not _memory(typ, self.aliases):
            return False
        old = self.get(key)
        if origins <= old:
            return False
        self.origin[key] = old | origins
        return True

    def step(self, op) -> bool:
        changed = False
        if not op.yields and not op.blocks:  # a plain op: all in, all out
            ins = self.union(op.operands)
            for key, typ in op.results:
                changed |= self.add(key, typ, ins)
        else:  # region-carried values (scf.for/if/while), position by position
            changed |= self._carry(op.results, [op.operands] + op.yields)
            if op.name not in _FUNCTIONS:
                for block in op.blocks:
                    changed |= self._carry(block, [op.operands] + op.yields)
        target = self.functions.get(op.callee) if op.callee else None
        if target is not None and target.blocks and target.blocks[0]:
            params = target.blocks[0]
            for a, (key, typ) in zip(op.operands[-len(params):], params):
                changed |= self.add(key, typ, self.get(a))
        return changed

    def _carry(self, values, sources) -> bool:
        """``values[-j]`` takes the origins of ``source[-j]`` of each source
        (aligned at the end: ``scf.for``'s operands are bounds, then the
        initial values its block arguments and results carry)."""
        changed = False
        n = len(values)
        for j, (key, typ) in enumerate(values):
            origins = frozenset().union(*(
                self.get(src[len(src) - n + j]) for src in sources
                if 0 <= len(src) - n + j < len(src)))
            changed |= self.add(key, typ, origins)
        return changed

    def record(self, op) -> None:
        name, operands = op.name, op.operands
        if name in _SRC_DST_COPIES:  # (src, dst, ...)
            self.writes |= self.union(_segment(op, 1))
        elif name == "cute.copy_atom_call" or name.endswith(".copy") and len(operands) >= 3:
            self.writes |= self.union(_segment(op, 2))  # (atom, src, dst, ...)
            atom = op.operand_types[0] if op.operand_types else ""
            atom = self.aliases.get(atom, atom)
            if re.search(r"tma_(store|reduce)|dsmem_store", atom):
                self.writes |= self.get(operands[0])
        elif name.endswith(".gemm") and len(operands) >= 2:
            self.writes |= self.get(operands[1])
        elif _STORES.search(name):
            self.writes |= self.union(operands)
        elif name in ("llvm.inline_asm", "nvvm.inline_ptx"):
            asm = re.search(r'(?:asm_string|ptxCode) = "((?:[^"\\]|\\.)*)"', op.line)
            if asm and _PTX_WRITE.search(asm.group(1)):
                found = self.union(operands)
                self.maybe |= found
                self.unattributed |= not found
        elif name in ("func.call", "llvm.call") and op.callee not in self.functions:
            self.maybe |= self.union(operands)  # a body the module does not hold


def analyze_text(text: str, entry_name: str | None = None) -> Writes:
    """The :class:`Writes` of a traced module printed in generic form: the
    operands are the host entry function's pointer arguments, in order
    (`entry_name`: that function; default the top-level ``func.func``
    taking a ``!cuda.stream``)."""
    ops, aliases, functions = parse(text)
    hosts = [op for op in functions.values() if op.name == "func.func" and op.scope == 0]
    entry = next((op for name, op in functions.items()
                  if op in hosts and name == entry_name), None) or \
        next((op for op in hosts if op.blocks and op.blocks[0]
              and "cuda.stream" in op.blocks[0][0][1]), None)
    if entry is None:
        return Writes(unattributed=True)
    flow = _Flow(ops, aliases, functions)
    pointers = [key for key, typ in (entry.blocks[0] if entry.blocks else ())
                if "ptr" in aliases.get(typ, typ)]
    for k, key in enumerate(pointers):
        flow.origin[key] = frozenset((k,))
    for _ in range(100):  # each pass follows values one launch or loop deeper
        if not any([flow.step(op) for op in ops]):
            break
    for op in ops:
        flow.record(op)
    return Writes(frozenset(flow.writes), frozenset(flow.maybe - flow.writes),
                  flow.unattributed)


def analyze(module, entry_name: str | None = None) -> Writes:
    """:func:`analyze_text` of an ``ir.Module`` (the DSL's, in a trace hook)."""
    return analyze_text(module.operation.get_asm(print_generic_op_form=True,
                                                 enable_debug_info=False), entry_name)
