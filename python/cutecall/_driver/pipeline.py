"""The one specialization pipeline: every front (JAX, torch, Helion's
launcher, a future one) reaches compiled kernels through :class:`Launcher`.

A front translates; the driver decides::

    launcher = Launcher(fn, name=..., constexprs=..., hint=front_hint)
    binding, leaves = launcher.bind(args, kwargs, num_outputs=...,
                                    describe=...)             # the driver binds
    operands = [OperandDesc(...) for each array leaf]         # the front describes
    result = launcher.specialize(operands, binding)           # the driver decides

:meth:`Launcher.bind` binds a call; when it names no outputs the output
placement stage (``outputs.stage``) decides where they sit, asking the
front's description of a binding (`describe`) and traces of the kernel,
and returns one binding. :meth:`Launcher.specialize` owns everything after
the descriptions: the static masks and the fallback ladder,
:class:`KernelSpec` (built here and nowhere else), the specialization key
(``key``), the compile or store lookup, and the rung to remember. A C++
launch object's first call (the typed ``_core.KernelEntry`` it registers) is
``launch_object``'s. No framework is imported.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable, Mapping, Sequence

from . import binding as _binding, call_checks, fallback, fallback_climb
from . import fingerprint as _fingerprint
from . import compile_locate, diagnosis, launcher_kind, target
from . import scalars as _scalars, signature as _signature
from .binding import Call
from .binding_builder import default_is_array
from .compile_error import CompileError
from .compiled import CompiledKernel, KernelSpec
from .dtype_contract import DtypeContract
from .key import specialization_key
from .operand import SOURCE_ARG, Description, OperandDesc, make_operand, tie_dims
from .outputs import stage
from .outputs.placement import NO_EVIDENCE, Evidence
from .pytree import CONST, Node
from .slots import Binding, SlotKind, describe as describe_binding
from .store import memory


def plain_hint(masks: Sequence[int], operands: Sequence) -> str:
    """How a user asks for `masks` when the front says nothing of its own:
    the dims, per operand (``x: extents (False, True)``)."""
    parts = [f"{op.name}: extents {e}" for op, e in
             zip(operands, fallback.static_parts(masks, operands)) if any(e)]
    return "static " + "; ".join(parts) if parts else "nothing"


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

    `hint(masks, operands)` says how the front's users ask for static
    extents (a warning of the static fallback quotes it; default
    :func:`plain_hint`). `keeps_static_masks`: the front's C++ launcher keys
    its calls by static masks (torch), so after a fallback climb the front
    keeps the masks (:attr:`Specialization.masks`) and describes them;
    otherwise the launcher remembers the rung (JAX). `dtypes`: the element
    types the call site declares per parameter (``dtype_contract``), checked
    before any form compiles."""

    def __init__(self, fn: Callable, *, name: str | None = None,
                 constexprs: Mapping[str, Any] | None = None,
                 compile_options: str | None = None, compile_key: Any = None,
                 static_fallback: bool | None = None,
                 hint: Callable[[Sequence[int], Sequence], str] = plain_hint,
                 keeps_static_masks: bool = False, dtypes: Mapping | None = None):
        if not callable(fn):
            raise TypeError(f"cutecall: launcher must be callable (a @cute.jit "
                            f"function or kernel object), got "
                            f"{type(fn).__name__}: {fn!r}")
        if compile_options is not None and not isinstance(compile_options, str):
            raise TypeError(f"cutecall: compile_options must be a str, got "
                            f"{compile_options!r}")
        if not callable(hint):
            raise TypeError(f"cutecall: hint must be a function (masks, operands) -> "
                            f"str, got {hint!r}")
        self.fn = fn
        self.sig = _signature.analyze(fn)
        self.name = name or self.sig.name
        self._launches = False  # checked before the first compile
        # What each argument was in the calls that compiled (diagnosis).
        self.history = diagnosis.CallHistory()
        self.fingerprint = _fingerprint.launcher_fingerprint(fn)
        self.constexprs = tuple(sorted((constexprs or {}).items()))
        prints = [[k, _fingerprint.value_fingerprint(v, f"constexpr {k!r}")]  # fails early
                  for k, v in self.constexprs]
        # What the launcher is, as a digest: launchers of one kernel share it.
        self.content = hashlib.sha256(repr((self.fingerprint, prints)).encode()).hexdigest()
        self.sig.check_constexprs(dict(self.constexprs))
        self.dtypes = DtypeContract(dtypes, self.sig, self.name)  # dtypes= checked
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
             num_outputs: int = 0, outputs_in_call: bool = False,
             order: str = "inputs_first", output_names: Sequence[str] | None = None,
             scalar_value: Callable = _scalars.concrete_scalar,
             is_array: Callable = default_is_array,
             describe: Callable[[Binding, list], Description] | None = None
             ) -> tuple[Binding, list]:
        """Binds one call's positional arguments (arrays, pytrees, runtime
        scalars, None) and keyword scalars to the launcher's parameters
        (``binding``), with `num_outputs` outputs: returned by the call, or
        among its arguments (`outputs_in_call`: a launch object's). Returns
        the binding and the array leaves' values, in ``Binding.leaves``
        order: the operands the front describes.

        Outputs not named go where the kernel writes them: the output
        placement stage (``outputs.stage.place``) asks `describe(binding,
        leaves)`, the front's :class:`~operand.Description` of a binding's
        arrays, and traces; without `describe` the rule places them."""
        call = Call(tuple(args), dict(kwargs or {}), num_outputs, outputs_in_call, order,
                    scalar_value, is_array)
        bound = self.bind_as(call, output_names=output_names)  # the rule's, or named
        if self.sig.inspected:  # None where the launcher declares a tensor
            call_checks.check_nones(self.sig, bound[0].slots, call.args, call.kwargs,
                                    self._constexpr_names, num_outputs, order,
                                    fixed=output_names is not None or not num_outputs)
        if output_names is None and num_outputs and describe is not None and \
                self.sig.inspected:
            self._check_kind()  # before any trace
            return stage.place(self, call, describe)
        return bound

    @property
    def _constexpr_names(self) -> set:
        return {k for k, _ in self.constexprs}

    def bind_as(self, call: Call, *, output_names: Sequence[str] | None = None,
                evidence: Evidence = NO_EVIDENCE) -> tuple[Binding, list]:
        """`call` bound with its outputs at `output_names`, or placed by the
        rule and the `evidence` of a placement question (``binding.bind``);
        a call that fits no binding is a TypeError naming the argument
        (``call_checks``)."""
        try:
            return _binding.bind(self.sig, call, self._constexpr_names,
                                 output_names=output_names, evidence=evidence)
        except TypeError:
            better = call_checks.explain(  # outputs among the arguments: counted there
                self.sig, call.args, call.kwargs, self._constexpr_names,
                0 if call.outputs_in_call else call.num_outputs, call.order)
            if better is None:
                raise
            raise TypeError(better) from None

    def _remember_compiled(self, binding: Binding) -> None:
        """After a compile: the objects it took (the launcher, constexprs,
        compile-time arguments) keep their first fingerprints in the state
        the trace left them (``fingerprint.remember_compiled_state``)."""
        values = [self.fn] + [v for _, v in self.constexprs]
        for tree in binding.trees:
            leaves = tree.leaves() if isinstance(tree, Node) else (tree,)
            values += [leaf.value for leaf in leaves if leaf.kind == CONST]
        for v in values:
            _fingerprint.remember_compiled_state(v)

    def _check_kind(self) -> None:
        """Raises for a launcher that launches nothing (a plain function, a
        bare ``@cute.kernel``), once, before its first trace."""
        if not self._launches:
            launcher_kind.check(self.fn, self.name)
            self._launches = True

    def parameter_names(self, binding: Binding) -> dict:
        """{Slot: the launcher parameter it fills}."""
        return binding.parameter_of(self.sig)

    # -- specializing --------------------------------------------------------

    def specialize(self, operands: Sequence[OperandDesc], binding: Binding, *,
                   device_arch: str | None = None, output_tree: Node | None = None,
                   num_args: int | None = None, num_rets: int | None = None,
                   device: int | None = None) -> Specialization:
        """Compiles (or finds) the kernel for one call: `operands` described
        by the front, the input array leaves first (``Binding.leaves``
        order), then the outputs the kernel writes, in the order
        `output_tree` holds them (default: none); `num_args`/`num_rets`: the
        plan's operand and result counts (default: inputs, outputs). Climbs
        the static-fallback ladder when the DSL rejects a form."""
        self._check_kind()
        options, arch = target.resolve_options(self.options, device_arch)

        def build(extra) -> KernelSpec:
            return self.spec(operands, binding, device_arch=arch, output_tree=output_tree,
                             num_args=num_args, num_rets=num_rets, extra=extra,
                             device=device)

        start = [0 if self.keeps_static_masks else self.static_dims.get(op.name, 0)
                 for op in operands]
        compiles = memory.compile_stats()["compiles"]
        try:
            kernel, spec, extra, level = fallback_climb.climb(
                build, operands, start, name=self.name, options=options, arch=arch,
                fallback=self.static_fallback,
                explicit=lambda masks: self.hint(
                    [op.static | m for op, m in zip(operands, masks)], operands))
        except CompileError as e:  # name the argument that likely caused it
            error = diagnosis.annotate(e, operands, self.history)

            def retrace(spec):
                with memory.lock:
                    return compile_locate.retrace(spec, options, arch)
            compile_locate.attach(error, lambda: build(start), retrace)  # its line
            raise compile_locate.located(error) from e
        if memory.compile_stats()["compiles"] != compiles:  # a trace may have filled
            self._remember_compiled(binding)                   # attributes in
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
             extra: Sequence[int] | None = None, device: int | None = None) -> KernelSpec:
        """The KernelSpec of one form of a call, without compiling: the
        front's static masks, plus `extra` per operand (a fallback rung).
        The one place a KernelSpec is built, with its key; `device`: the
        CUDA device the front launches on (``target.resolve``)."""
        self.dtypes.check(operands)  # a declared dtype, before anything compiles
        tgt = target.resolve(self.options, device_arch, device)
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
            trees=[t.key(_fingerprint.value_fingerprint) for t in trees],
            slots=binding.slots,
            scalar_types=scalar_types, keyword_scalars=binding.keyword_scalars,
            symbols=symbols, constexprs=self.constexprs, compile_options=tgt.options,
            compile_key=self.compile_key, arch=tgt.arch, scalar_defaults=defaults,
            device=tgt.device.key())
        return KernelSpec(
            launcher=self.fn, constexprs=self.constexprs, operands=tuple(specs),
            num_inputs=n_in, num_args=n_in if num_args is None else num_args,
            num_rets=len(specs) - n_in if num_rets is None else num_rets,
            input_tree=trees[0], output_tree=trees[1], key=key,
            param_names=tuple(p.name for p in params) or
            tuple(f"p{i}" for i in range(len(binding.slots))),
            slots=binding.slots, keyword_scalars=binding.keyword_scalars,
            scalar_types=scalar_types, scalar_defaults=defaults, symbols=symbols,
            binding=describe_binding(self.sig, binding), target=tgt)

