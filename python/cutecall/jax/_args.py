"""The JAX front's description step: what a ``cutlass_call`` is told about
its arrays -- specs per array (one for all, a flat list, or a pytree
mirroring the arguments), input/output aliases over top-level positions or
pytree key paths -- turned into the driver's operand descriptions; runtime
scalars read as host values; XLA layouts of compiled operands."""

from __future__ import annotations

import warnings
from typing import Mapping

import jax

from .._driver import operand as _operand, signature as _signature
from .._driver.binding import Slot, SlotKind
from .._driver.operand import SOURCE_ARG, SOURCE_RET
from .._driver.tensor_spec import TensorSpec

# ---------------------------------------------------------------------------
# Specs: a TensorSpec for all arrays, a flat list, or a pytree mirroring them

def is_spec_leaf(x) -> bool:
    if x is None or isinstance(x, TensorSpec):
        return True
    # NVIDIA's legacy shorthand: a bare int sequence is TensorSpec(mode=...).
    return isinstance(x, (list, tuple)) and bool(x) and \
        all(isinstance(i, int) for i in x)


def spec_leaf(x, what: str):
    if x is None or isinstance(x, TensorSpec):
        return x
    if isinstance(x, (list, tuple)):
        return TensorSpec(mode=tuple(x))
    raise TypeError(f"cutecall: {what} entries must be cutecall.TensorSpec, None "
                    f"or a mode tuple, got {type(x).__name__}: {x!r}")


def flat_specs(spec, present: list[bool], what: str) -> list:
    """One spec (or None) per present array, from `spec` that is None, one
    TensorSpec for all, or a sequence/pytree with one entry per array --
    either per present array or mirroring absent (None) ones too."""
    n = sum(present)
    if spec is None or isinstance(spec, TensorSpec):
        return [spec] * n
    leaves = [spec_leaf(x, what)
              for x in jax.tree.leaves(spec, is_leaf=is_spec_leaf)]
    if len(leaves) == n:
        return leaves
    if len(leaves) == len(present):
        for p, s in zip(present, leaves):
            if not p and s is not None:
                raise ValueError(f"cutecall: {what} gives {s!r} for an absent "
                                 "(None) array; an absent array takes None")
        return [s for p, s in zip(present, leaves) if p]
    raise ValueError(f"cutecall: {what} has {len(leaves)} entries for {n} arrays: "
                     f"{spec!r}")


def deprecated_mode(spec, mode, what: str):
    if mode is None:
        return spec
    if spec is not None:
        raise ValueError(f"cutecall: {what}_spec and {what}_mode cannot both be "
                         f"set; {what}_mode is deprecated, use {what}_spec")
    warnings.warn(f"cutecall: {what}_mode is deprecated; use "
                  f"{what}_spec=cutecall.TensorSpec(mode=...)",
                  DeprecationWarning, stacklevel=3)
    return mode


# ---------------------------------------------------------------------------
# Aliases: {input: output} over top-level positions (ints) or leaves (paths)

def check_aliases(aliases) -> tuple:
    if aliases is None:
        return ()
    if not isinstance(aliases, Mapping):
        raise TypeError("cutecall: input_output_aliases must be a dict "
                        f"{{input: output}}, got {aliases!r}")
    out = []
    for i, o in aliases.items():
        for side, v in (("input", i), ("output", o)):
            ok = (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or \
                (isinstance(v, tuple) and bool(v))
            if not ok:
                raise TypeError(f"cutecall: input_output_aliases {side} {v!r} "
                                "must be a non-negative int (a top-level "
                                "argument/output) or a jax.tree_util key path")
        out.append((i, o))
    if len({o for _, o in out}) != len(out):
        raise ValueError("cutecall: input_output_aliases maps two inputs to one "
                         f"output: {aliases!r}")
    return tuple(out)


def leaves_under(paths: list, prefix: tuple) -> list[int]:
    return [k for k, p in enumerate(paths) if tuple(p[:len(prefix)]) == prefix]


def resolve_aliases(aliases, in_paths, out_paths, name):
    """Flat (input leaf, output leaf) pairs and the output leaves hidden from
    the kernel (path aliases; int aliases remove whole top-level outputs)."""
    pairs, hidden = [], set()
    key = jax.tree_util.SequenceKey
    for i, o in aliases:
        if isinstance(i, int):  # range-checked by CutlassCall._bind
            i = (key(i),)
        whole = isinstance(o, int)
        if whole:
            o = (key(o),)
        ins, outs = leaves_under(in_paths, i), leaves_under(out_paths, o)
        if not ins or not outs:
            side, p = ("input", i) if not ins else ("output", o)
            raise ValueError(f"cutecall: input_output_aliases {side} "
                             f"{jax.tree_util.keystr(p)} of '{name}' selects no "
                             "array")
        if len(ins) != len(outs) or any(
                in_paths[a][len(i):] != out_paths[b][len(o):]
                for a, b in zip(ins, outs)):
            raise ValueError(f"cutecall: input_output_aliases "
                             f"{jax.tree_util.keystr(i)} -> "
                             f"{jax.tree_util.keystr(o)} of '{name}': the input "
                             "and output pytrees differ")
        pairs += zip(ins, outs)
        if not whole:
            hidden.update(outs)
    return tuple(pairs), hidden


# ---------------------------------------------------------------------------
# Descriptions

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


def describe_operands(call, arrays, binding, in_leaves, out_structs, out_paths,
                      aliased, top) -> list:
    """The description step of CutlassCall `call`: an OperandDesc per input
    leaf, then per output leaf the kernel writes (aliased ones excluded),
    named after the launcher parameter it binds to plus its key path."""
    present, pos = [], dict(zip(binding.arrays, arrays))
    for k in sorted(binding.arrays + binding.absent):
        present += [False] if k not in pos else [
            x is not None for x in jax.tree.leaves(pos[k], is_leaf=lambda x: x is None)]
    in_specs = flat_specs(call.input_spec, present, "input_spec")
    out_specs = flat_specs(call.output_spec, [True] * len(out_structs), "output_spec")
    kept = [j for j in range(top) if j not in call.whole_outputs]
    param_of = call.launcher.parameter_names(binding)
    keystr = jax.tree_util.keystr
    out = []
    for k, ((path, x), s) in enumerate(zip(in_leaves, in_specs)):
        a = path[0].idx
        nm = param_of.get(Slot(SlotKind.INPUT, a), f"input{a}") + keystr(tuple(path[1:]))
        out.append(describe(nm, SOURCE_ARG, k, x, s, call.use_static_tensors, call.name))
    for b in (b for b in range(len(out_structs)) if b not in aliased):
        path = out_paths[b]
        j = kept.index(path[0].idx)
        nm = param_of.get(Slot(SlotKind.OUTPUT, j), f"output{path[0].idx}") + \
            keystr(tuple(path[1:]))
        out.append(describe(nm, SOURCE_RET, b, out_structs[b], out_specs[b],
                            call.use_static_tensors, call.name))
    return out


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
    return _signature.concrete_scalar(x, what)
