"""Which tensors a launcher writes, read from the MLIR the CuTe DSL traced.

The DSL traces cutecall's entry point (``wrapper.cutecall_entry``) into an
MLIR module before any pass runs; ``cute.compile(...,
trace_finalize_hooks=)`` hands that module to a hook. In it, every tensor
operand enters the host function as one ``!cute.ptr`` argument (operand k is
the k-th pointer: ``docs/abi.md``). :func:`analyze` follows each pointer
through the values that carry memory (pointers, tensors, copy atoms, TMA
descriptors and their coordinate tensors; never layouts, shapes or numbers),
into kernels through their launches (``cuda.launch_ex``) and calls, and
records the operands that reach the destination of a store, a copy, an
atomic or a TMA store/reduce: the kernel's writes, as its authors wrote
them.

The evidence is three sets of operand indices: ``written`` (a write op's
destination), ``maybe`` (a pointer reaching inline PTX that stores (``llvm.inline_asm``,
``nvvm.inline_ptx``), or a
call the module has no body for) and ``unattributed`` (a storing inline PTX
whose address is no longer a pointer: any tensor may be written). The
fronts bind outputs to written parameters (``placement.place_written``);
with unattributed writes the evidence cannot contradict any binding.

:func:`observing` scopes one compile: its hook records what the trace
writes and, when asked to check, stops the compile right after the trace
-- before the DSL's passes, the costly part -- if an output parameter is
written by nothing while other tensors are (:class:`OutputsElsewhere`).
:func:`trace_writes` traces without compiling, for a kernel found in a
cache. The CuTe DSL is imported only by the functions that trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
from typing import Any, Callable, Iterable

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
        if name.endswith(".copy") and len(operands) >= 3:
            self.writes |= self.get(operands[2])
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
        elif name.endswith("call") and op.callee not in self.functions:
            self.maybe |= self.union(operands)


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


# ---------------------------------------------------------------------------
# Parameters, and the compile that observes them

@dataclasses.dataclass(frozen=True)
class ParamWrites:
    """What a trace writes, by launcher parameter: ``written`` and ``maybe``
    (names), ``unattributed`` as in :class:`Writes`."""

    written: frozenset
    maybe: frozenset
    unattributed: bool

    @property
    def candidates(self) -> frozenset:
        return self.written | self.maybe

    def contradicts(self, outputs) -> bool:
        """A binding whose outputs include a parameter nothing writes, while
        other parameters are written: the outputs are elsewhere."""
        return not self.unattributed and bool(self.candidates - set(outputs)) and \
            any(o not in self.candidates for o in outputs)


class OutputsElsewhere(Exception):
    """A trace shows the kernel writing parameters other than the call's
    outputs. Raised by the compile before the DSL's passes; the front binds
    again with :attr:`writes` (``Launcher.bind`` reads them)."""

    def __init__(self, kernel: str, outputs, writes: ParamWrites):
        self.kernel, self.outputs, self.writes = kernel, tuple(outputs), writes
        super().__init__(
            f"cutecall: kernel '{kernel}' writes {', '.join(sorted(writes.candidates))}, "
            f"not {', '.join(map(str, outputs))}: binding its outputs again")


def param_writes(spec, writes: Writes) -> ParamWrites | None:
    """`writes` (operand indices of `spec`) by parameter name: an operand is
    its parameter's (``x``, ``args['k']``, ``args.k``). None when the
    launcher's parameters are not known."""
    names = [n for n in spec.param_names if n]
    if not names or all(re.fullmatch(r"p\d+", n) for n in names):
        return None

    def param(operand: str) -> str | None:
        for n in sorted(names, key=len, reverse=True):
            if operand == n or operand.startswith((n + "[", n + ".")):
                return n
        return None

    def of(indices) -> frozenset:
        return frozenset(p for i in indices if i < len(spec.operands)
                         for p in [param(spec.operands[i].name)] if p)
    return ParamWrites(of(writes.written), of(writes.maybe), writes.unattributed)


def output_params(spec) -> list[str]:
    from .binding import SlotKind
    return [n for n, slot in zip(spec.param_names, spec.slots)
            if slot.kind == SlotKind.OUTPUT]


@dataclasses.dataclass
class Observation:
    """One scope's compiles: what the last trace wrote (None: no trace ran,
    e.g. a cache hit), and the abort it raised."""

    check: bool
    writes: ParamWrites | None = None
    abort: OutputsElsewhere | None = None
    stop: bool = False  # stop every compile after its trace (trace_writes)


_current: contextvars.ContextVar = contextvars.ContextVar("cutecall_written_params",
                                                          default=None)


@contextlib.contextmanager
def observing(check: bool):
    """Compiles in this scope record what their trace writes; with `check`
    a trace that contradicts its binding's outputs stops the compile
    (:class:`OutputsElsewhere`). Yields the :class:`Observation`."""
    obs = Observation(check)
    token = _current.set(obs)
    try:
        yield obs
    finally:
        _current.reset(token)


def trace_hook(spec, name: str):
    """The ``trace_finalize_hooks`` entry for compiling `spec` (None outside
    :func:`observing`, or when the installed DSL has no such hook)."""
    obs = _current.get()
    if obs is None:
        return None

    def hook(owner, module, function_name):
        found = param_writes(spec, analyze(module, function_name))
        obs.writes = found
        outputs = output_params(spec)
        if obs.stop or (found is not None and obs.check and outputs
                           and found.contradicts(outputs)):
            obs.abort = OutputsElsewhere(name, outputs, found or
                                         ParamWrites(frozenset(), frozenset(), True))
            raise obs.abort
    return hook


def reraise(exc: BaseException) -> None:
    """In a compile's error path: raises the :class:`OutputsElsewhere` that
    stopped it (the DSL wraps what a hook raises)."""
    obs = _current.get()
    if obs is not None and obs.abort is not None:
        raise obs.abort from None


def trace_writes(spec, name: str, options: str, arch: str) -> ParamWrites | None:
    """What `spec`'s kernel writes, from a trace alone (the DSL's passes do
    not run): for a kernel a cache held. None when the trace fails or says
    nothing."""
    from . import compiler
    from .compile_error import CompileError
    from .store import memory
    with observing(check=False) as obs, memory.lock:
        obs.stop = True
        try:
            compiler.compile_kernel(spec, name, options, arch)
        except OutputsElsewhere:
            pass
        except CompileError:
            return None
    return obs.writes


class PlacementFailed(OutputsElsewhere):
    """The kernel did not compile with its outputs where the rule placed
    them: the front binds again, passing that placement over (a kernel
    traced with an input where it writes may fail before its writes are
    seen). :attr:`error` is the compile's error."""

    def __init__(self, kernel: str, outputs, error: BaseException):
        self.error = error
        super().__init__(kernel, outputs, ParamWrites(frozenset(), frozenset(), True))


# Placements a front tries after the rule's failed to compile.
MAX_PROBES = 3


def retrying(attempt: Callable[[], Any]) -> Any:
    """``attempt()`` (a front's bind and compile), again while its compile
    finds the outputs elsewhere (:class:`OutputsElsewhere`: the launcher has
    learned where the kernel writes, and binds there) or fails with them
    where the rule put them (:class:`PlacementFailed`: the launcher tries
    the next placement, at most :data:`MAX_PROBES`). When no placement
    compiles, the rule's error is raised."""
    first = None
    for _ in range(MAX_PROBES + 2):
        try:
            return attempt()
        except PlacementFailed as e:
            first = first or e.error
        except OutputsElsewhere:
            pass
        except Exception:
            if first is not None:  # a probe's own error: the rule's is clearer
                raise first from None
            raise
    raise first if first is not None else RuntimeError("cutecall: no binding compiled")


def learned_outputs(launcher, result, params, num_outputs: int) -> list[str] | None:
    """The `num_outputs` parameters among `params` (the open ones, in
    order) that a launch object's outputs are, learned from what the kernel
    of `result` (a ``pipeline.Specialization``) writes: its trace, or the
    launcher's last one, or -- for a kernel a cache held, when this process
    has traced none -- a trace now. None when the evidence says nothing or
    fits several placements equally (the rule stays)."""
    from . import placement, target
    writes = result.writes or launcher.writes
    if writes is None:
        options, arch = target.resolve_options(launcher.options, result.kernel.arch)
        writes = launcher.writes = trace_writes(result.spec, launcher.name, options, arch)
    if writes is None or writes.unattributed or not writes.candidates or \
            not launcher.sig.inspected:
        return None
    index = {p.name: i for i, p in enumerate(launcher.sig.params)}
    try:
        return placement.written_params(launcher.sig, [index[p.name] for p in params],
                                        num_outputs, launcher.name, writes.candidates)
    except (TypeError, ValueError):
        return None
