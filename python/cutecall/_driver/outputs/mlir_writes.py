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
has no body for) and ``unattributed`` (storing inline PTX whose address
comes from no operand the walk followed: any tensor may be written). A
pointer turned into an integer (``cute.ptrtoint``: ``out.iterator.toint()``)
keeps its origin through the integer arithmetic that makes an address of it
(``_ADDRESS_OPS``), so ``st.global`` at ``base + 4 * i`` is attributed. Text only: the DSL's value
casters turn some ``ir.Value`` objects into ones whose construction is not
safe outside a trace, so the walk never touches them. No CuTe DSL import.

Cost (it runs inside every compile that learns or checks outputs): the
parse reads an op's types only when a value with origins reaches it, and
the propagation visits only the ops such values reach (a worklist), so an
FA4 forward module of ~10k ops takes about a third of the time it took
when every op was typed and stepped in full passes.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re

from .mlir_text import FUNCTIONS, Op, parse

# Types that never carry memory: numbers, and CuTe's layout algebra.
_NOT_MEMORY = re.compile(
    r"^(i\d+|ui\d+|si\d+|f\d+|bf16|tf32|index|vector<|none|!cute\.(layout|shape|"
    r"stride|coord|int_tuple|tile|swizzle|composed_layout|basis|static|tuple)\b)")
# Shared memory, registers and tensor memory: no global tensor flows there.
_ON_CHIP = re.compile(r"^!cute\.(memref|ptr)<[^,]+, (smem|rmem|tmem)\b")
# Ops writing every memory operand they take (a value stored is a number).
_STORES = re.compile(r"(^|\.)(store|store_vec|atomic\w*|red|cas|exch)\b|"
                     r"\.atomicrmw$|\.atomic_|\.store$|tma_(store|reduce)")
# Integer ops an address passes through: from a pointer to an integer, and
# an offset added or bits masked (never a value compared or divided).
_ADDRESS_OPS = frozenset((
    "cute.ptrtoint", "llvm.ptrtoint", "arith.addi", "arith.subi", "arith.andi",
    "arith.ori", "arith.xori", "arith.extsi", "arith.extui", "arith.trunci",
    "arith.index_cast", "arith.index_castui", "llvm.add", "llvm.sub", "llvm.and",
    "llvm.or", "llvm.zext", "llvm.sext"))
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


# Copies whose first operands are (src, dst); ``cute.copy`` and
# ``cute.copy_atom_call`` take the atom first.
_SRC_DST_COPIES = ("lir.copy", "lir.simt_auto_vec_copy", "cuda.memory.copy",
                   "cuda.memory.copy_async")


def _segment(op: Op, k: int) -> list:
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


_NONE: frozenset = frozenset()


@functools.lru_cache(maxsize=4096)
def _may_write(name: str) -> bool:
    """Whether an op of this name is one :meth:`_Flow.record` reads: a
    copy, an MMA, a store or atomic, inline PTX or a call."""
    return name in _SRC_DST_COPIES or name == "cute.copy_atom_call" or \
        name.endswith((".copy", ".gemm")) or bool(_STORES.search(name)) or \
        name in ("llvm.inline_asm", "nvvm.inline_ptx", "func.call", "llvm.call")


class _Flow:
    """Origins (operand indices) per SSA value, propagated to a fixed point."""

    def __init__(self, ops, aliases, functions):
        self.ops, self.aliases, self.functions = ops, aliases, functions
        self.origin: dict = {}
        self.changed: list = []  # keys whose origins grew, for `propagate`
        self.writes: set = set()
        self.maybe: set = set()
        self.unattributed = False

    def get(self, key) -> frozenset:
        return self.origin.get(key, _NONE)

    def union(self, keys) -> frozenset:
        origin = self.origin
        found = [origin[k] for k in keys if k in origin]
        if not found:
            return _NONE
        return found[0] if len(found) == 1 else frozenset().union(*found)

    def add(self, key, typ, origins, address: bool = False) -> bool:
        """`origins` join `key`'s when its type carries memory, or when it
        is an `address` made of one (an integer)."""
        if not origins or not (address or _memory(typ, self.aliases)):
            return False
        old = self.get(key)
        if origins <= old:
            return False
        self.origin[key] = old | origins
        self.changed.append(key)
        return True

    def step(self, op) -> bool:
        changed = False
        if not op.yields and not op.blocks:  # a plain op: all in, all out
            ins = self.union(op.operands)
            if ins:
                address = op.name in _ADDRESS_OPS
                for key, typ in op.typed().results:
                    changed |= self.add(key, typ, ins, address)
        else:  # region-carried values (scf.for/if/while), position by position
            changed |= self._carry(op.results, [op.operands] + op.yields)
            if op.name not in FUNCTIONS:
                for block in op.blocks:
                    changed |= self._carry(block, [op.operands] + op.yields)
        target = self.functions.get(op.callee) if op.callee else None
        if target is not None and target.blocks and target.blocks[0]:
            params = target.blocks[0]
            for a, (key, typ) in zip(op.operands[-len(params):], params):
                changed |= self.add(key, typ, self.get(a))
        return changed

    def propagate(self) -> None:
        """Steps the ops that use a value with origins, and again each op
        whose operands or yielded values gain origins, until none does: the
        fixed point of stepping every op until nothing changes (an op none
        of whose values has origins moves none), without visiting the ops
        no operand reaches."""
        users = collections.defaultdict(list)
        for op in self.ops:
            for key in op.operands:
                users[key].append(op)
            for keys in op.yields:
                for key in keys:
                    users[key].append(op)
        order = {id(op): i for i, op in enumerate(self.ops)}
        queue = collections.deque(sorted(
            {id(op): op for key in self.origin for op in users.get(key, ())}.values(),
            key=lambda op: order[id(op)]))
        queued = set(map(id, queue))
        while queue:
            op = queue.popleft()
            queued.discard(id(op))
            self.changed = []
            if not self.step(op):
                continue
            for key in self.changed:
                for user in users.get(key, ()):
                    if id(user) not in queued:
                        queued.add(id(user))
                        queue.append(user)

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
        if not _may_write(name):
            return
        if name in _SRC_DST_COPIES:  # (src, dst, ...)
            self.writes |= self.union(_segment(op, 1))
        elif name == "cute.copy_atom_call" or name.endswith(".copy") and len(operands) >= 3:
            self.writes |= self.union(_segment(op, 2))  # (atom, src, dst, ...)
            atom = op.input_types()[0] if op.input_types() else ""
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
    flow.propagate()
    for op in ops:
        flow.record(op)
    return Writes(frozenset(flow.writes), frozenset(flow.maybe - flow.writes),
                  flow.unattributed)


def analyze(module, entry_name: str | None = None) -> Writes:
    """:func:`analyze_text` of an ``ir.Module`` (the DSL's, in a trace hook)."""
    return analyze_text(module.operation.get_asm(print_generic_op_form=True,
                                                 enable_debug_info=False), entry_name)
