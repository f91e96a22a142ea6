"""``cutlass_call``'s array specs: ``input_spec``/``output_spec`` given as
one ``TensorSpec`` for all arrays, ``{operand name: TensorSpec}``, a flat
list, or a pytree mirroring the arguments (NVIDIA's bare mode tuples
too), read into one spec (or None) per present array; the deprecated
``input_mode``/``output_mode``."""

from __future__ import annotations

import warnings
from typing import Mapping

import jax

from .._driver.tensor_spec import TensorSpec



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


def flat_specs(spec, present: list[bool], what: str, names: list[str] = ()) -> list:
    """One spec (or None) per present array, from `spec` that is None, one
    TensorSpec for all, ``{operand name: TensorSpec}`` (names as errors
    show them: ``"epilogue_args.mC"``), or a sequence/pytree with one entry
    per array -- either per present array or mirroring absent (None) ones
    too. `names`: the present arrays' operand names."""
    n = sum(present)
    if spec is None or isinstance(spec, TensorSpec):
        return [spec] * n
    if isinstance(spec, Mapping):
        unknown = [k for k in spec if k not in names]
        if unknown:
            raise ValueError(f"cutecall: {what} names {unknown}, which are not array "
                             f"operands of the call; those are {list(names)}")
        return [spec_leaf(spec.get(nm), what) for nm in names]
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
