"""The JAX front's description step: what a ``cutlass_call`` is told about
its arrays -- specs per array (``_specs``) and input/output aliases
(``_aliases``) applied to the bound call's leaves -- turned into the
driver's operand descriptions; what the front passes as an array; runtime
scalars read as host values; XLA layouts of compiled operands."""

from __future__ import annotations

import jax
import numpy as np

from .._driver import fallback, operand as _operand, pytree, scalars as _scalars
from .._driver.binding import Slot, SlotKind
from .._driver.operand import SOURCE_ARG, SOURCE_RET, Description
from .._driver.tensor_spec import TensorSpec
from ._aliases import driver_path, leaves_under, resolve_aliases
from ._specs import flat_specs


def describe(name: str, source: int, index: int, x, spec, static_default: bool,
             kernel: str) -> _operand.OperandDesc:
    """The operand description of array (or ``ShapeDtypeStruct``) `x` under
    `spec` (a TensorSpec or None); `static_default`: use_static_tensors."""
    who = _operand.who(kernel, source, name)
    spec = spec or TensorSpec(static=static_default or None)
    if not isinstance(spec, TensorSpec):
        raise TypeError(f"{who}: its spec must be a cutecall.TensorSpec, got "
                        f"{type(spec).__name__}: {spec!r}")
    rank = len(x.shape)
    static = _operand.per_dim(static_default if spec.static is None else spec.static,
                              rank, f"{who}: static", False)
    return _operand.OperandDesc(
        name=name, source=source, index=index, dtype=x.dtype, shape=tuple(x.shape),
        order=spec.layout, mode=spec.mode, align=spec.ptr_assumed_align,
        extent_div=spec.divisibility, static=_operand.static_mask(static),
        dims=spec.dims)


def describe_operands(call, flat_in, binding, out_structs, out_paths, aliased,
                      top, unpassed) -> list:
    """The description step of CutlassCall `call`: an OperandDesc per input
    array leaf, then per output leaf the kernel writes (`aliased` ones
    excluded), named after the launcher parameter it binds to plus its key
    path (``epilogue_args.mC``); `unpassed`: the top-level outputs the
    launcher does not receive."""
    param_of = call.launcher.parameter_names(binding)
    names = leaf_names(call, binding)
    trees = dict(zip(binding.arrays, binding.trees))
    present = []
    for k in sorted(binding.arrays + binding.absent):
        present += [False] if k not in trees else [
            leaf.kind == pytree.ARRAY for leaf in _leaves(trees[k])
            if leaf.kind in (pytree.ARRAY, pytree.NONE)]
    in_specs = flat_specs(call.input_spec, present, "input_spec", names)
    kept = [j for j in range(top) if j not in unpassed]
    out_names = []
    for b in range(len(out_structs)):
        j = out_paths[b][0].value
        nm = param_of.get(Slot(SlotKind.OUTPUT, kept.index(j)), f"output{j}") \
            if j in kept else f"output{j}"
        out_names.append(nm + pytree.keystr(out_paths[b][1:]))
    out_specs = flat_specs(call.output_spec, [True] * len(out_structs), "output_spec",
                           out_names)
    out = [describe(nm, SOURCE_ARG, k, x, s, call.use_static_tensors, call.name)
           for k, (nm, x, s) in enumerate(zip(names, flat_in, in_specs))]
    out += [describe(out_names[b], SOURCE_RET, b, out_structs[b], out_specs[b],
                     call.use_static_tensors, call.name)
            for b in range(len(out_structs)) if b not in aliased]
    return out


def describe_call(call, flat_in, binding, outs) -> tuple:
    """The description step of one call of CutlassCall `call` bound as
    `binding` (`flat_in`: its array leaves, values or tracers; `outs`: its
    output contract): the :class:`~operand.Description` the driver
    compiles (and the output placement stage traces), the alias pairs
    (input leaf, output leaf) and the leaves' key paths (inputs rooted at
    the call's positional arguments, outputs at its results)."""
    ret_tree, out_structs, top, unpassed = outs
    in_paths = [(pytree.Key("index", binding.arrays[a]),) + path
                for a, path in binding.leaves]
    positional = jax.tree.unflatten(ret_tree, out_structs)
    if top == 1 and not isinstance(positional, (list, tuple)):
        positional = (positional,)
    out_leaves = jax.tree_util.tree_flatten_with_path(tuple(positional))[0]
    out_paths = [driver_path(p) for p, _ in out_leaves]
    pairs, hidden = resolve_aliases(call.aliases, in_paths, out_paths, call.name)
    for a, b in pairs:
        x, o = flat_in[a], out_structs[b]
        if (x.shape, x.dtype) != (o.shape, o.dtype):
            raise ValueError(f"cutecall: input {pytree.keystr(in_paths[a])} "
                             f"{x.dtype}{list(x.shape)} of '{call.name}' cannot "
                             f"alias output {pytree.keystr(out_paths[b])} "
                             f"{o.dtype}{list(o.shape)}")
    # Aliased outputs the launcher also receives are operands of their own.
    passed = {b for b, p in enumerate(out_paths) if p[0].value not in unpassed}
    aliased = {b for _, b in pairs} - (passed - hidden)
    operands = describe_operands(call, flat_in, binding, out_structs, out_paths, aliased,
                                 top, unpassed)
    # The kernel's outputs: top-level outputs not aliased whole, with
    # path-aliased leaves hidden (None).
    kernel_positional = []
    for j in (j for j in range(top) if j not in unpassed):
        leaves, tree = jax.tree.flatten(positional[j])
        base = leaves_under(out_paths, (pytree.Key("index", j),))
        kernel_positional.append(jax.tree.unflatten(
            tree, [None if b in hidden else leaf for b, leaf in zip(base, leaves)]))
    described = Description(tuple(operands), output_tree(kernel_positional), len(flat_in),
                            len(out_structs), call.arch)
    return described, pairs, in_paths, out_paths


def explicit_static(masks, operands) -> str:
    """How a ``cutlass_call`` user asks for `masks` (the static fallback's
    warning quotes it): ``use_static_tensors=True``, or ``input_spec`` and
    ``output_spec`` with ``TensorSpec(static=...)`` per array."""
    extents = fallback.static_parts(masks, operands)
    if all(all(e) for e in extents):
        return "cutlass_call(..., use_static_tensors=True)"

    def spec(e):
        return "None" if not any(e) else "TensorSpec(static=True)" if all(e) \
            else f"TensorSpec(static={e})"
    sides = {side: [spec(e) for op, e in zip(operands, extents)
                    if (op.source == SOURCE_ARG) == (side == "input_spec")]
             for side in ("input_spec", "output_spec")}
    parts = [f"{side}=({', '.join(s)},)" for side, s in sides.items() if s]
    return f"cutlass_call(..., {', '.join(parts)})"


def leaf_names(call, binding) -> list[str]:
    """Per input array leaf of a bound call, its name: the launcher
    parameter it reaches plus its key path (``epilogue_args.mC``)."""
    param_of = call.launcher.parameter_names(binding)
    arg_names = [param_of.get(Slot(SlotKind.INPUT, a), f"input{k}")
                 for a, k in enumerate(binding.arrays)]
    return [arg_names[a] + pytree.keystr(path) for a, path in binding.leaves]


def _leaves(tree):
    return tree.leaves() if isinstance(tree, pytree.Node) else (tree,)


def output_tree(kernel_positional) -> pytree.Node:
    """The driver's tree of the kernel's outputs (``ShapeDtypeStruct``
    leaves; hidden ones None)."""
    def no_scalars(path, value, scalar_type):
        raise TypeError(f"cutecall: output_shape_dtype{pytree.keystr(path)} is a "
                        f"scalar ({value!r}); outputs are arrays")
    return pytree.flatten(tuple(kernel_positional), is_array, no_scalars)[0]


def is_array(x) -> bool:
    """What the JAX front passes as a kernel tensor: a JAX array or tracer,
    a ``ShapeDtypeStruct``, a NumPy array."""
    return isinstance(x, (jax.Array, jax.core.Tracer, jax.ShapeDtypeStruct, np.ndarray)) \
        or (hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "aval"))


def xla_layout(op) -> tuple[int, ...]:
    """XLA minor-to-major for a compiled operand's CuTe stride order."""
    return tuple(sorted(range(op.rank), key=lambda d: op.order[d]))


def scalar_value(x, what: str):
    """A runtime scalar argument as a host value: a traced value has none,
    and the error says what to do instead."""
    if isinstance(x, jax.core.Tracer):
        raise TypeError(
            f"cutecall: {what} is a traced JAX value ({x.aval}); a runtime "
            "scalar travels with the call as a host value, so it must be known "
            "when the call is traced. Pass a Python/NumPy scalar (or a concrete "
            "array), or pass the value as a shape-(1,) array operand and read it "
            "in the kernel.")
    return _scalars.concrete_scalar(x, what)


def check_output_params(output_params):
    """``cutlass_call(output_params=...)``: None or a tuple of names."""
    if output_params is None:
        return None
    if isinstance(output_params, str) or not all(isinstance(n, str) for n in output_params):
        raise TypeError(f"cutecall: output_params must be a sequence of parameter "
                        f"names, got {output_params!r}")
    return tuple(output_params)
