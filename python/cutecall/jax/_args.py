"""What a ``cutlass_call`` is told about its arrays: specs per array (one
for all, a flat list, or a pytree mirroring the arguments) and input/output
aliases over top-level positions or pytree key paths."""

from __future__ import annotations

import warnings
from typing import Mapping

import jax

from .._driver import spec as _spec

# ---------------------------------------------------------------------------
# Specs: a TensorSpec for all arrays, a flat list, or a pytree mirroring them

def is_spec_leaf(x) -> bool:
    if x is None or isinstance(x, _spec.TensorSpec):
        return True
    # NVIDIA's legacy shorthand: a bare int sequence is TensorSpec(mode=...).
    return isinstance(x, (list, tuple)) and bool(x) and \
        all(isinstance(i, int) for i in x)


def spec_leaf(x, what: str):
    if x is None or isinstance(x, _spec.TensorSpec):
        return x
    if isinstance(x, (list, tuple)):
        return _spec.TensorSpec(mode=tuple(x))
    raise TypeError(f"cutecall: {what} entries must be cutecall.TensorSpec, None "
                    f"or a mode tuple, got {type(x).__name__}: {x!r}")


def flat_specs(spec, present: list[bool], what: str) -> list:
    """One spec (or None) per present array, from `spec` that is None, one
    TensorSpec for all, or a sequence/pytree with one entry per array --
    either per present array or mirroring absent (None) ones too."""
    n = sum(present)
    if spec is None or isinstance(spec, _spec.TensorSpec):
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
