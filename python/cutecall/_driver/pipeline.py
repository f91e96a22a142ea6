"""The one specialization pipeline: every front (JAX, torch, Helion's
launcher, a future one) reaches compiled kernels through :class:`Launcher`.

A front translates; the driver decides::

    launcher = Launcher(fn, name=..., constexprs=..., hint="torch")
    binding, leaves = launcher.bind(args, kwargs, num_outputs=...)  # the driver binds
    operands = [OperandDesc(...) for each array leaf]         # the front describes
    result = launcher.specialize(operands, binding)           # the driver decides
    entry = launcher.entry(result, arg_uses(binding, len(args)))  # for C++

:meth:`Launcher.specialize` owns everything after the descriptions: the
static masks and the fallback ladder, :class:`KernelSpec` (built here and
nowhere else), the specialization key (``key``), the compile or store
lookup, and the rung to remember. :meth:`Launcher.entry` is the typed entry
(``_core.KernelEntry``) a C++ launcher registers. No framework is imported.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

from .. import _core
from . import binding as _binding, fallback, fingerprint as _fingerprint, runtime
from . import diagnosis, launcher_kind, signature as _signature, target
from .binding import Binding, SlotKind
from .compile_error import CompileError
from .compiled import CompiledKernel, KernelSpec
from .key import specialization_key
from .operand import SOURCE_ARG, OperandDesc, make_operand, tie_dims
from .pytree import ARRAY, CONST, SCALAR, Node

HINT_STYLES = ("cutlass_call", "torch", "helion")


@dataclasses.dataclass(frozen=True)
class Specialization:
    """What :meth:`Launcher.specialize` decided: the compiled kernel (named
    after this launcher), its spec, the static mask each operand was
    compiled with (the front's request and the fallback's dims) and how many
    forms were tried before it (0: the first compiled)."""

    kernel: CompiledKernel
    spec: KernelSpec
    masks: tuple
    level: int


class Launcher:
    """A launcher (a ``@cute.jit`` function or kernel object) as a front
    binds it once: its signature and content fingerprint (taken now: a
    kernel object's attributes may change while it is traced), constexprs,
    compile options and key, and the static-fallback policy.

    `hint` names how the front's users ask for static extents (see
    ``fallback.explicit_hint``). `keeps_static_masks`: the front's C++
    launcher keys its calls by static masks (torch), so after a fallback
    climb the front keeps the masks (:attr:`Specialization.masks`) and
    describes them; otherwise the launcher remembers the rung (JAX)."""

    def __init__(self, fn: Callable, *, name: str | None = None,
                 constexprs: Mapping[str, Any] | None = None,
                 compile_options: str | None = None, compile_key: Any = None,
                 static_fallback: bool | None = None, hint: str = "cutlass_call",
                 keeps_static_masks: bool = False):
        if not callable(fn):
            raise TypeError(f"cutecall: launcher must be callable (a @cute.jit "
                            f"function or kernel object), got "
                            f"{type(fn).__name__}: {fn!r}")
        if compile_options is not None and not isinstance(compile_options, str):
            raise TypeError(f"cutecall: compile_options must be a str, got "
                            f"{compile_options!r}")
        if hint not in HINT_STYLES:
            raise ValueError(f"cutecall: hint must be one of {HINT_STYLES}, got {hint!r}")
        self.fn = fn
        self.sig = _signature.analyze(fn)
        self.name = name or self.sig.name
        self._launches = False  # checked before the first compile
        # What each argument was in the calls that compiled (diagnosis).
        self.history = diagnosis.CallHistory()
        self.fingerprint = _fingerprint.launcher_fingerprint(fn)
        self.constexprs = tuple(sorted((constexprs or {}).items()))
        for k, v in self.constexprs:  # fail early on unusable constexprs
            _fingerprint.fingerprint(v, f"constexpr {k!r}")
        self.sig.check_constexprs(dict(self.constexprs))
        self.options = compile_options
        if compile_key is not None:
            try:
                hash(compile_key)
            except TypeError:
                raise TypeError(f"cutecall: compile_key must be hashable, got "
                                f"{compile_key!r}") from None
        self.compile_key = None if compile_key is None else \
            _fingerprint.fingerprint(compile_key, "compile_key")
        self.static_fallback = fallback.check_option(static_fallback)
        self.hint = hint
        self.keeps_static_masks = keeps_static_masks
        # What the static fallback compiled in last, by operand name (fronts
        # that do not keep masks themselves): later calls start there.
        self.static_dims: dict[str, int] = {}

    def __repr__(self):
        return f"Launcher({self.name})"

    # -- binding -------------------------------------------------------------

    def bind(self, args: Sequence, kwargs: Mapping | None = None, *,
             num_outputs: int = 0, order: str = "inputs_first",
             output_names: Sequence[str] | None = None,
             scalar_value: Callable = _signature.concrete_scalar,
             is_array: Callable = _binding.default_is_array) -> tuple[Binding, list]:
        """Binds one call's positional arguments (arrays, pytrees, runtime
        scalars, None) and keyword scalars to the launcher's parameters,
        placing `num_outputs` outputs (``binding`` module). Returns the
        binding and the array leaves' values, in ``Binding.leaves`` order:
        the operands the front describes."""
        return _binding.bind(self.sig, args, kwargs or {}, num_outputs, order,
                             {k for k, _ in self.constexprs}, output_names,
                             scalar_value, is_array)

    def parameter_names(self, binding: Binding) -> dict:
        """{Slot: the launcher parameter it fills}."""
        return binding.parameter_of(self.sig)

    # -- specializing --------------------------------------------------------

    def specialize(self, operands: Sequence[OperandDesc], binding: Binding, *,
                   device_arch: str | None = None, output_tree: Node | None = None,
                   num_args: int | None = None, num_rets: int | None = None
                   ) -> Specialization:
        """Compiles (or finds) the kernel for one call: `operands` described
        by the front, the input array leaves first (``Binding.leaves``
        order), then the outputs the kernel writes, in the order
        `output_tree` holds them (default: none); `num_args`/`num_rets`: the
        plan's operand and result counts (default: inputs, outputs). Climbs
        the static-fallback ladder when the DSL rejects a form."""
        if not self._launches:  # a plain function would compile to nothing
            launcher_kind.check(self.fn, self.name)
            self._launches = True
        options, arch = target.resolve_options(self.options, device_arch)

        def build(extra) -> KernelSpec:
            return self.spec(operands, binding, device_arch=arch, output_tree=output_tree,
                             num_args=num_args, num_rets=num_rets, extra=extra)

        start = [0 if self.keeps_static_masks else self.static_dims.get(op.name, 0)
                 for op in operands]
        try:
            kernel, spec, extra, level = fallback.climb(
                build, operands, start, self.name, options, arch, self.static_fallback,
                lambda masks: fallback.explicit_hint(
                    self.hint, [op.static | m for op, m in zip(operands, masks)], operands))
        except CompileError as e:  # name the argument that likely caused it
            raise diagnosis.annotate(e, operands, self.history) from e
        self.history.record(operands)
        if not self.keeps_static_masks:
            self.static_dims.update({op.name: m for op, m in zip(operands, extra) if m})
        if kernel.name != self.name:  # a compile shared with another launcher
            kernel = dataclasses.replace(kernel, name=self.name)
        masks = tuple(op.static | m for op, m in zip(operands, extra))
        return Specialization(kernel, spec, masks, level)

    def spec(self, operands: Sequence[OperandDesc], binding: Binding, *,
             device_arch: str | None = None, output_tree: Node | None = None,
             num_args: int | None = None, num_rets: int | None = None,
             extra: Sequence[int] | None = None) -> KernelSpec:
        """The KernelSpec of one form of a call, without compiling: the
        front's static masks, plus `extra` per operand (a fallback rung).
        The one place a KernelSpec is built, with its key."""
        options, arch = target.resolve_options(self.options, device_arch)
        n_in = sum(op.source == SOURCE_ARG for op in operands)
        trees = (Node("tuple", None, tuple(range(len(binding.trees))), binding.trees),
                 output_tree or Node("tuple", None, (), ()))
        extra = extra or (0,) * len(operands)
        specs = [make_operand(op, m, self.name) for op, m in zip(operands, extra)]
        specs, symbols = tie_dims(specs, [tuple(op.shape) for op in operands], self.name)
        scalar_types = tuple(s.scalar_type for s in binding.scalars)
        params = self.sig.params if self.sig.inspected else ()
        given = {p.name for p, slot in zip(params, binding.slots)
                 if slot.kind != SlotKind.DEFAULT}
        given |= {n for n, _ in binding.keyword_scalars} | set(dict(self.constexprs))
        defaults = _signature.scalar_defaults(self.sig, given) if self.sig.inspected else ()
        key = specialization_key(
            launcher=self.fingerprint, operands=specs,
            trees=[t.key(_fingerprint.fingerprint) for t in trees], slots=binding.slots,
            scalar_types=scalar_types, keyword_scalars=binding.keyword_scalars,
            symbols=symbols, constexprs=self.constexprs, compile_options=options,
            compile_key=self.compile_key, arch=arch, scalar_defaults=defaults)
        return KernelSpec(
            launcher=self.fn, constexprs=self.constexprs, operands=tuple(specs),
            num_inputs=n_in, num_args=n_in if num_args is None else num_args,
            num_rets=len(specs) - n_in if num_rets is None else num_rets,
            input_tree=trees[0], output_tree=trees[1], key=key,
            param_names=tuple(p.name for p in params) or
            tuple(f"p{i}" for i in range(len(binding.slots))),
            slots=binding.slots, keyword_scalars=binding.keyword_scalars,
            scalar_types=scalar_types, scalar_defaults=defaults, symbols=symbols,
            binding=_binding.describe(self.sig, binding))

    # -- the typed entry for C++ ---------------------------------------------

    def entry(self, result: Specialization, uses: Sequence) -> "_core.KernelEntry":
        """The ``_core.KernelEntry`` a C++ launch object registers: the
        compiled kernel and, per call argument, how it reaches the plan
        (:func:`arg_uses`)."""
        runtime.ensure_runtime_path()
        k = result.kernel
        return _core.KernelEntry(
            module=k.module, sha256=k.sha256, function=k.function, kernel=k.name,
            plan=list(k.plan), operand_names=k.operand_names,
            symbol_names=k.symbol_names, uses=list(uses))


def call_leaves(binding: Binding, num_args: int,
                positions: Sequence[int] | None = None) -> list:
    """The leaves a C++ launch object reads from a call of `num_args`
    arguments, in its order (an argument that is a container contributes its
    leaves depth first, any other argument one): per leaf ``("array",
    operand)``, ``("scalar", slot, type)``, ``("const", value)`` (a
    compile-time leaf: a call must match it) or ``("ignore",)`` (None, an
    argument compiled in by the front).
    The bound arguments sit at `positions` of the call (default: all)."""
    positions = range(num_args) if positions is None else positions
    bound = {c: k for k, c in enumerate(positions)}
    out, operand = [], 0
    for c in range(num_args):
        k = bound.get(c)
        slot = binding.arg_slots[k] if k is not None else None
        if slot is not None and slot.kind == SlotKind.INPUT:
            tree = binding.trees[slot.index]
            for leaf in (tree.leaves() if isinstance(tree, Node) else (tree,)):
                if leaf.kind == ARRAY:
                    out.append(("array", operand))
                    operand += 1
                elif leaf.kind == SCALAR:
                    out.append(("scalar", leaf.value, leaf.scalar_type))
                elif leaf.kind == CONST:
                    out.append(("const", leaf.value))
                else:
                    out.append(("ignore",))
        elif slot is not None and slot.kind == SlotKind.SCALAR:
            out.append(("scalar", slot.index, binding.scalars[slot.index].scalar_type))
        else:
            out.append(("ignore",))
    return out


def arg_uses(binding: Binding, num_args: int, *, positions: Sequence[int] | None = None,
             written: Sequence[int] = ()) -> list:
    """Per leaf of a call (:func:`call_leaves`), how it reaches the plan
    (``_core.ArgUse``); operands in `written` are outputs (a launch whose
    outputs are all empty does nothing)."""
    uses = []
    for leaf in call_leaves(binding, num_args, positions):
        if leaf[0] == "array":
            uses.append(_core.ArgUse(_core.UseKind.OUTPUT if leaf[1] in written
                                     else _core.UseKind.TENSOR, leaf[1]))
        elif leaf[0] == "scalar":
            uses.append(_core.ArgUse(_core.UseKind.SCALAR, leaf[1],
                                     getattr(_core.ScalarType, leaf[2])))
        elif leaf[0] == "const":
            uses.append(_core.ArgUse(_core.UseKind.CONST, value=leaf[1]))
        else:
            uses.append(_core.ArgUse(_core.UseKind.IGNORE))
    return uses


def arg_masks(binding: Binding, masks: Sequence[int], num_args: int, *,
              positions: Sequence[int] | None = None,
              base: Sequence[int] | None = None) -> list:
    """Per leaf of a call (:func:`call_leaves`), the StaticMask a C++ launch
    object keys its calls by: `base` (the masks kept so far; default none)
    with each operand's entry of `masks` (:attr:`Specialization.masks`)."""
    leaves = call_leaves(binding, num_args, positions)
    out = list(base or []) + [0] * max(0, len(leaves) - len(base or []))
    for i, leaf in enumerate(leaves):
        if leaf[0] == "array":
            out[i] = masks[leaf[1]]
    return out
