"""What a C++ launch object reads of a call and registers for it: the
leaves of a bound call in C++'s order (:func:`call_leaves`), how each
reaches the launch plan (:func:`leaf_uses`) and what it compiled in
(:func:`leaf_masks`), the typed ``_core.KernelEntry`` that carries them
(:func:`kernel_entry`), and the types C++ must be told how to read
(:func:`register_types`). No framework is imported.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from .. import _core
from . import pytree, runtime
from .slots import SlotKind
from .pytree import ARRAY, CONST, SCALAR, Node


def kernel_entry(result, uses: Sequence,
                 static_masks: Sequence[int] = ()) -> "_core.KernelEntry":
    """The ``_core.KernelEntry`` a C++ launch object registers for `result`
    (a ``pipeline.Specialization``): the compiled kernel; per leaf of a
    call, how it reaches the plan (:func:`leaf_uses`) and what it compiled
    in (:func:`leaf_masks`; none: all dynamic)."""
    return entry_of(result.kernel, uses, static_masks)


def entry_of(k, uses: Sequence, static_masks: Sequence[int] = ()) -> "_core.KernelEntry":
    """The ``_core.KernelEntry`` of CompiledKernel `k` (compiled here, or
    loaded: a recipe's hit) for a call whose leaves reach the plan as
    `uses`, with `static_masks` compiled in."""
    runtime.ensure_runtime_path()
    masks = list(static_masks) if any(static_masks) else []
    if k.entry is not None:  # parsed by the compile that made it
        return k.entry.with_uses(uses=list(uses), static_masks=masks)
    return _core.KernelEntry(
        module=k.module, sha256=k.sha256, function=k.function, kernel=k.name,
        plan=list(k.plan), operand_names=k.operand_names,
        symbol_names=k.symbol_names, uses=list(uses), static_masks=masks)


def call_leaves(bound) -> list:
    """The leaves a C++ launch object reads from a call (`bound`:
    ``launch_object.BoundCall``), in its order (an argument that is a
    container contributes its leaves depth first, any other argument one): per leaf ``("array", operand)``, ``("scalar",
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
