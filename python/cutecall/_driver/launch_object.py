"""The first call of a C++ launch object, written once for every front.

A C++ launch object (``_core.TensorLauncher``) reads each call itself and
launches the specialization its table holds. On a miss it calls back with
the call's arguments and the layout facts (``_core.LayoutProps``) of the
tensors it read. :class:`LaunchObject` is that callback, and everything a
launch object is that no framework decides -- its outputs (named, or the
parameters its kernel writes, asked once), the call with outputs merged in
(``allocate=``), what ``static=`` and ``dims=`` compile in::

    bound = launch_object.bind(args)               # the driver binds: one walk
    arch = front.check(bound, launch=True)         # bad arrays named, the device
    leaves = call_leaves(bound)                    # the leaves C++ reads
    operands = [front.describe(...) per tensor]    # the front describes
    result = bound.launcher.specialize(operands, bound.binding)  # the driver decides
    entry = kernel_entry(result, uses, static_masks)           # C++ registers it

A front (``cutecall.torch.Kernel``, Helion's launcher) is a description
step and its framework's tensor glue (:class:`Front`). The entry carries its
static masks and C++ keys the entry by their values when it registers it:
nothing here changes while C++ is inside its callback, and the call is read
once. No framework is imported.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

from .. import _core
from . import pytree
from .binding import Binding
from .call_leaves import call_leaves, kernel_entry, leaf_masks, leaf_uses
from .compiled import CompiledKernel
from .launch_options import dims_from_option, masks_from_option, open_params, \
    outputs_from_option
from .operand import Description, OperandDesc
from .outputs import placement
from .pipeline import Launcher
from .pytree import ARRAY
from .signature import TENSOR


@dataclasses.dataclass(frozen=True)
class BoundCall:
    """One call as its front bound it: the launcher, the binding, the array
    leaves' values (``Binding.leaves`` order), how many arguments the C++
    launch object saw, and at which of them the bound ones sit (default:
    all, in order)."""

    launcher: Launcher
    binding: Binding
    arrays: list
    num_args: int
    positions: tuple | None = None


class Front(Protocol):
    """What a front tells a :class:`LaunchObject`: what its arrays are, and
    per array its description. A front whose calls bind to a launcher of
    their own (Helion's, one per schema) also has ``bind(args) ->
    BoundCall``."""

    def is_array(self, x: Any) -> bool:
        """Whether `x` is one of the front's arrays."""

    def check(self, bound: BoundCall, launch: bool) -> str:
        """Raises, naming the argument and its value, for an array leaf no
        kernel can take (`launch`: for a launch, on a device; otherwise a
        compile ahead of time); returns the arch its arrays' device runs."""

    def describe(self, name: str, index: int, array: Any, props: "_core.LayoutProps",
                 mask: int, dims: tuple | None) -> OperandDesc:
        """The operand array leaf `index` (named `name`, with C++'s `props`)
        compiles to, with StaticMask `mask` in and its dims named `dims`."""

    def measure(self, array: Any) -> "_core.LayoutProps":
        """The layout facts C++ would read from `array`."""


class LaunchObject:
    """The first-call logic of one C++ launch object (module docstring). It
    remembers the masks the last static fallback compiled in, so that later
    calls of the same leaf layout start there (C++ keys each entry by its
    own), and its outputs once asked.

    `outputs`: how many tensor parameters the kernel writes, or their
    names; `static`: ``True`` (every extent and stride of every tensor) or
    ``{parameter: True | per-dim bools}``; `dims`: ``{parameter: (name or
    None per dim)}`` (as ``cutecall.torch.kernel`` documents them). Without
    `launcher` the front binds each call itself (``Front.bind``)."""

    def __init__(self, front: Front, launcher: Launcher | None = None, *,
                 outputs: int | Sequence[str] = 0, static=None, dims=None):
        self.front, self.launcher = front, launcher
        self._leaves = None        # the call layout `_masks` were made for
        self._masks = None         # per leaf: a StaticMask; None before any
        self.params = open_params(launcher) if launcher is not None else []
        self.num_outputs, names = outputs_from_option(outputs)
        self._rule = self._named_or_rule(names)
        self._placed = None if names is None else tuple(names)
        self.dims = dims_from_option(dims, self.params)
        self.param_masks = masks_from_option(static, self.params)
        # What static= compiles in, per argument (each entry carries its own).
        self.option_masks = [self.param_masks.get(p.name, 0) for p in self.params] \
            if self.param_masks else None

    def _named_or_rule(self, names) -> tuple:
        """The outputs named (checked), or the parameters the rule puts
        them at (``placement.written_params``) until a trace tells."""
        tensors = [p.name for p in self.params if p.kind == TENSOR]
        if names is not None:
            for n in names:
                if n not in tensors:
                    raise ValueError(f"cutecall: outputs names {n!r}, which is not a "
                                     f"tensor parameter of '{self.launcher.name}'; "
                                     f"those are {', '.join(tensors)}")
            return tuple(names)
        sig = self.launcher.sig if self.launcher is not None else None
        if not self.num_outputs or sig is None or not sig.inspected:
            return ()
        index = {p.name: i for i, p in enumerate(sig.params)}
        return tuple(placement.written_params(sig, [index[p.name] for p in self.params],
                                              self.num_outputs, self.launcher.name))

    # -- outputs -------------------------------------------------------------

    @property
    def output_params(self) -> list[str]:
        """The parameters the kernel writes: named, or asked (the first
        call or compile), else where the rule puts them."""
        return list(self._placed if self._placed is not None else self._rule)

    @property
    def outputs_known(self) -> bool:
        """Whether :attr:`output_params` is final: named, or asked."""
        return self._placed is not None or not self._rule

    def place(self, args: Sequence, props: Sequence = ()) -> list[str]:
        """The outputs of a launcher-order call, asked once: the parameters
        its kernel writes (``outputs.stage``: a trace, no compile)."""
        if not self.outputs_known:
            self.bind(args, props)
        return self.output_params

    def merge(self, args: Sequence, outs: Sequence) -> list:
        """The launcher-order call: `args`, with `outs` at the output
        parameters (at the end for an uninspected launcher)."""
        if not self.launcher.sig.inspected:
            return [*args, *outs]
        merged, a, o = [], iter(args), iter(outs)
        out_names = set(self.output_params)
        used = 0
        for p in open_params(self.launcher, [*args, *outs]):
            if p.name in out_names:
                merged.append(next(o))
            elif used < len(args):
                merged.append(next(a))
                used += 1
            else:
                break
        if used < len(args):
            raise TypeError(f"cutecall: '{self.launcher.name}' takes "
                            f"{len(self.params) - self.num_outputs} arguments "
                            f"besides its outputs, got {len(args)}")
        return merged

    @property
    def static_masks(self) -> list | None:
        """Per leaf of a call, the StaticMask the last static fallback (or
        ``static=``) compiled in; None when nothing is."""
        return self._masks or self.option_masks

    # -- the first call --------------------------------------------------------

    def bind(self, args: Sequence, props: Sequence = (), launch: bool = False) -> BoundCall:
        """A launcher-order call bound to the launcher's parameters, its
        outputs where the kernel writes them (asked on the first call)."""
        bind = getattr(self.front, "bind", None)
        if bind is not None:
            return bind(args)
        binding, leaves = self.launcher.bind(
            args, num_outputs=self.num_outputs, outputs_in_call=True,
            output_names=self._placed, is_array=self.front.is_array,
            describe=lambda b, found: self._question(args, b, found, props, launch))
        if self._placed is None and self._rule:
            self._placed = tuple(binding.written)
        return BoundCall(self.launcher, binding, leaves, len(args))

    def _question(self, args, binding: Binding, leaves, props, launch) -> Description:
        """A binding's description, for the output placement stage."""
        bound = BoundCall(self.launcher, binding, leaves, len(args))
        arch = self.front.check(bound, launch)
        operands, _ = self.describe(bound, self._props(bound, props), [0] * len(leaves),
                                     outputs=False)
        return Description(tuple(operands), device_arch=arch)

    def entry(self, args: Sequence, props: Sequence) -> "_core.KernelEntry":
        """The specialization of a launch (compiled, or found in the store)
        as C++ registers it, for its arrays' device. `props`: the
        ``LayoutProps`` of the tensor leaves C++ read (None entries are
        skipped; missing ones measured)."""
        return self.specialization(args, props)[1]

    def specialization(self, args: Sequence, props: Sequence, launch: bool = True,
                       arch: str | None = None) -> tuple:
        """(CompiledKernel, ``_core.KernelEntry``) of a call: :meth:`entry`
        with the kernel it registers (a recipe records its store key); not
        `launch`: :meth:`compile`'s checks, for `arch` (default the arrays'
        device's)."""
        bound, found, leaves, operands, written = self._describe(args, props, launch)
        result = bound.launcher.specialize(operands, bound.binding,
                                           device_arch=arch or found)
        masks = self._remember(leaves, result.masks)
        return result.kernel, kernel_entry(result, leaf_uses(leaves, written), masks)

    def compile(self, args: Sequence, props: Sequence = (),
                arch: str | None = None) -> CompiledKernel:
        """The compiled kernel of a call, without a launch (no device; for
        `arch`, default the arrays' device's)."""
        bound, found, leaves, operands, _ = self._describe(args, props, False)
        result = bound.launcher.specialize(operands, bound.binding,
                                           device_arch=arch or found)
        self._remember(leaves, result.masks)
        return result.kernel

    def spec_of(self, args: Sequence, props: Sequence, arch: str) -> tuple:
        """(KernelSpec, per-leaf ``_core.ArgUse``) of a call: what a miss
        compiles, without compiling."""
        bound, _, leaves, operands, written = self._describe(args, props, False)
        return (bound.launcher.spec(operands, bound.binding, device_arch=arch),
                leaf_uses(leaves, written))

    def _props(self, bound: BoundCall, props: Sequence) -> list:
        props = [p for p in props if p is not None]
        if len(props) != len(bound.arrays):
            props = [self.front.measure(a) for a in bound.arrays]
        return props

    def _describe(self, args, props, launch: bool):
        bound = self.bind(args, props, launch)
        arch = self.front.check(bound, launch)
        leaves = call_leaves(bound)
        kept = self._masks if self._leaves == leaves else None
        masks = [kept[i] if kept else 0
                 for i, leaf in enumerate(leaves) if leaf[0] == ARRAY]
        operands, written = self.describe(bound, self._props(bound, props), masks)
        return bound, arch, leaves, operands, written

    def describe(self, bound: BoundCall, props: list, masks: list,
                  outputs: bool = True) -> tuple[list, list]:
        """(an OperandDesc per tensor leaf, indices of the written ones:
        none unless `outputs`): the front describes each with ``static=``
        and `masks` in and its ``dims=``."""
        operands, written = [], []
        for i, (nm, t) in enumerate(zip(leaf_names(bound), bound.arrays)):
            per_dim = self.dims.get(nm)
            if per_dim is not None and len(per_dim) != len(t.shape):
                raise ValueError(f"cutecall: '{bound.launcher.name}': dims[{nm!r}] names "
                                 f"{len(per_dim)} dims, but the tensor has rank "
                                 f"{len(t.shape)}")
            mask = self.param_masks.get(nm, 0) | masks[i]
            op = self.front.describe(nm, i, t, props[i], mask, per_dim)
            operands.append(op)
            if outputs and nm in bound.binding.written:
                if props[i].overlap:
                    raise ValueError(
                        f"cutecall: output '{nm}' of '{bound.launcher.name}' (shape "
                        f"{tuple(op.shape)}, strides {tuple(op.strides)}) has elements "
                        "that several indices reach (an expand()ed or overlapping "
                        "as_strided view): the kernel's writes would race. Pass a "
                        "tensor that owns its elements (.contiguous() or .clone()).")
                written.append(i)
        return operands, written

    def _remember(self, leaves, masks) -> list:
        """Per leaf, the StaticMask each operand compiled with; kept when
        any is set."""
        out = leaf_masks(leaves, masks)
        if any(out):
            self._masks, self._leaves = out, leaves
        return out


def leaf_names(bound: BoundCall) -> list[str]:
    """Per array leaf of a bound call, its name: ``x``, ``epilogue.mC``,
    ``arg2`` (uninspected launchers)."""
    binding = bound.binding
    param_of = bound.launcher.parameter_names(binding)
    arg = [param_of.get(binding.arg_slots[k]) or f"arg{k}" for k in binding.arrays]
    return [arg[a] + pytree.keystr(path) for a, path in binding.leaves]
