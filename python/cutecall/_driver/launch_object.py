"""The first call of a C++ launch object, written once for every front.

A C++ launch object (``_core.TensorLauncher``) reads each call itself and
launches the specialization its table holds. On a miss it calls back with
the call's arguments and the layout facts (``_core.LayoutProps``) of the
tensors it read. :class:`LaunchObject` is that callback, for any front::

    bound = front.bind(args)                       # the driver binds: one walk
    arch = front.check(bound, launch=True)         # bad arrays named, the device
    leaves = call_leaves(bound)                    # the leaves C++ reads
    operands, written = front.describe(bound, props, masks)   # the front describes
    result = bound.launcher.specialize(operands, bound.binding)  # the driver decides
    entry = kernel_entry(result, uses, static_masks)           # C++ registers it

A front (``cutecall.torch.Kernel``, Helion's launcher) only binds and
describes its arrays, as the JAX front does. The entry carries its static
masks -- the extents and strides its kernel compiled in, per leaf -- and C++
keys the entry by their values when it registers it: nothing in the launch
object changes while C++ is inside its callback, and the call is read once.
On a miss the argument tree is walked once (the binding) and the bound tree
once (:func:`call_leaves`); the plan is parsed once (by the entry, which
C++ registers). No framework is imported.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol, Sequence

from .. import _core
from . import pytree, runtime
from .binding import Binding, SlotKind
from .compiled import CompiledKernel
from .pipeline import Launcher, Specialization
from .pytree import ARRAY, CONST, SCALAR, Node


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
    """What a front tells a :class:`LaunchObject`."""

    def bind(self, args: Sequence) -> BoundCall:
        """Binds a call (``Launcher.bind``); raises its errors."""

    def check(self, bound: BoundCall, launch: bool) -> str:
        """Raises, naming the argument and its value, for an array leaf no
        kernel can take (`launch`: for a launch, on a device; otherwise a
        compile ahead of time); returns the arch its arrays' device runs."""

    def describe(self, bound: BoundCall, props: list, masks: list) -> tuple[list, list]:
        """(``OperandDesc`` per array leaf, indices of the written ones):
        the array leaves of `bound` whose layouts are `props` (one
        ``_core.LayoutProps`` each), compiled with at least `masks` (one
        StaticMask each) in."""

    def measure(self, array: Any) -> "_core.LayoutProps":
        """The layout facts C++ would read from `array`."""


class LaunchObject:
    """The first-call logic of one C++ launch object: bind, check,
    describe, specialize, and the ``_core.KernelEntry`` that carries its
    uses and static masks. It remembers the masks the last static fallback
    compiled in, so that later calls of the same leaf layout start there
    (C++ keys each entry by its own)."""

    def __init__(self, front: Front):
        self.front = front
        self._leaves = None        # the call layout `static_masks` were made for
        self.static_masks = None   # per leaf: a StaticMask; None before any

    def entry(self, args: Sequence, props: Sequence) -> "_core.KernelEntry":
        """The specialization of a launch (compiled, or found in the store)
        as C++ registers it, for its arrays' device. `props`: the
        ``LayoutProps`` of the tensor leaves C++ read (None entries are
        skipped; missing ones measured)."""
        bound, arch, leaves, operands, written = self._describe(args, props, True)
        result = bound.launcher.specialize(operands, bound.binding, device_arch=arch)
        if self._learned(result):  # the outputs are where the kernel writes
            written = self._describe(args, props, True)[4]
        masks = self._remember(leaves, result.masks)
        return kernel_entry(result, leaf_uses(leaves, written), masks)

    def compile(self, args: Sequence, props: Sequence = (),
                arch: str | None = None) -> CompiledKernel:
        """The compiled kernel of a call, without a launch (no device; for
        `arch`, default the arrays' device's)."""
        bound, found, leaves, operands, _ = self._describe(args, props, False)
        result = bound.launcher.specialize(operands, bound.binding,
                                           device_arch=arch or found)
        self._learned(result)
        self._remember(leaves, result.masks)
        return result.kernel

    def _learned(self, result) -> bool:
        """Tells a front that learns its outputs from what the kernel
        writes (``learn_outputs``, optional) about a compile; True when its
        outputs changed."""
        learn = getattr(self.front, "learn_outputs", None)
        return bool(learn(result)) if learn is not None else False

    def spec(self, args: Sequence, props: Sequence, arch: str) -> tuple:
        """(KernelSpec, per-leaf ``_core.ArgUse``) of a call: what a miss
        compiles, without compiling."""
        bound, _, leaves, operands, written = self._describe(args, props, False)
        return (bound.launcher.spec(operands, bound.binding, device_arch=arch),
                leaf_uses(leaves, written))

    def _describe(self, args, props, launch: bool):
        bound = self.front.bind(args)
        arch = self.front.check(bound, launch)
        leaves = call_leaves(bound)
        props = [p for p in props if p is not None]
        if len(props) != len(bound.arrays):
            props = [self.front.measure(a) for a in bound.arrays]
        kept = self.static_masks if self._leaves == leaves else None
        masks = [kept[i] if kept else 0
                 for i, leaf in enumerate(leaves) if leaf[0] == ARRAY]
        operands, written = self.front.describe(bound, props, masks)
        return bound, arch, leaves, operands, written

    def _remember(self, leaves, masks) -> list:
        """Per leaf, the StaticMask each operand compiled with; kept when
        any is set."""
        out = leaf_masks(leaves, masks)
        if any(out):
            self.static_masks, self._leaves = out, leaves
        return out


def kernel_entry(result: Specialization, uses: Sequence,
                 static_masks: Sequence[int] = ()) -> "_core.KernelEntry":
    """The ``_core.KernelEntry`` a C++ launch object registers: the compiled
    kernel; per leaf of a call, how it reaches the plan (:func:`leaf_uses`)
    and what it compiled in (:func:`leaf_masks`; none: all dynamic)."""
    runtime.ensure_runtime_path()
    k = result.kernel
    masks = list(static_masks) if any(static_masks) else []
    if k.entry is not None:  # parsed by the compile that made it
        return k.entry.with_uses(uses=list(uses), static_masks=masks)
    return _core.KernelEntry(
        module=k.module, sha256=k.sha256, function=k.function, kernel=k.name,
        plan=list(k.plan), operand_names=k.operand_names,
        symbol_names=k.symbol_names, uses=list(uses), static_masks=masks)


def call_leaves(bound: BoundCall) -> list:
    """The leaves a C++ launch object reads from a call, in its order (an
    argument that is a container contributes its leaves depth first, any
    other argument one): per leaf ``("array", operand)``, ``("scalar",
    slot, type)``, ``("const", value)`` (a compile-time leaf: a call must
    match it) or ``("ignore",)`` (None, an argument compiled in by the
    front)."""
    binding = bound.binding
    positions = range(bound.num_args) if bound.positions is None else bound.positions
    at = {c: k for k, c in enumerate(positions)}
    out, operand = [], 0
    for c in range(bound.num_args):
        k = at.get(c)
        slot = binding.arg_slots[k] if k is not None else None
        if slot is not None and slot.kind == SlotKind.INPUT:
            tree = binding.trees[slot.index]
            for leaf in (tree.leaves() if isinstance(tree, Node) else (tree,)):
                if leaf.kind == ARRAY:
                    out.append((ARRAY, operand))
                    operand += 1
                elif leaf.kind == SCALAR:
                    out.append((SCALAR, leaf.value, leaf.scalar_type))
                elif leaf.kind == CONST:
                    out.append((CONST, leaf.value))
                else:
                    out.append(("ignore",))
        elif slot is not None and slot.kind == SlotKind.SCALAR:
            out.append((SCALAR, slot.index, binding.scalars[slot.index].scalar_type))
        else:
            out.append(("ignore",))
    return out


def leaf_uses(leaves: Sequence, written: Sequence[int] = ()) -> list:
    """Per leaf (:func:`call_leaves`), how it reaches the plan
    (``_core.ArgUse``); operands in `written` are outputs (a launch whose
    outputs are all empty does nothing)."""
    uses = []
    for leaf in leaves:
        if leaf[0] == ARRAY:
            uses.append(_core.ArgUse(_core.UseKind.OUTPUT if leaf[1] in written
                                     else _core.UseKind.TENSOR, leaf[1]))
        elif leaf[0] == SCALAR:
            uses.append(_core.ArgUse(_core.UseKind.SCALAR, leaf[1],
                                     getattr(_core.ScalarType, leaf[2])))
        elif leaf[0] == CONST:
            uses.append(_core.ArgUse(_core.UseKind.CONST, value=leaf[1]))
        else:
            uses.append(_core.ArgUse(_core.UseKind.IGNORE))
    return uses


def leaf_masks(leaves: Sequence, masks: Sequence[int]) -> list:
    """Per leaf (:func:`call_leaves`), the StaticMask its operand compiled
    with (`masks`: :attr:`Specialization.masks`, per operand); 0 for leaves
    that are not arrays."""
    return [masks[leaf[1]] if leaf[0] == ARRAY else 0 for leaf in leaves]


def register_types(launch, args: Sequence, is_array: Callable[[Any], bool]) -> None:
    """Tells C++ launch object `launch` how to read the objects in `args`
    that are not arrays, numbers, None or plain containers: dataclasses
    (their fields), CuTe DSL values (runtime scalars) and anything else
    (compile-time, by identity). The same walk as ``pytree.flatten``."""
    def walk(x):
        if x is None or isinstance(x, (bool, int, float)) or is_array(x):
            return
        if isinstance(x, (tuple, list)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif pytree.is_container(x):
            fields = [f.name for f in dataclasses.fields(x) if f.init]
            launch.register_type(type(x), "node", fields)
            for name in fields:
                walk(getattr(x, name))
        else:
            launch.register_type(type(x), "scalar" if pytree.dsl_scalar_type(x)
                                 else "const")
    for a in args:
        walk(a)
