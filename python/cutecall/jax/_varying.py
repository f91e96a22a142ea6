"""``shard_map``'s varying manual axes for cutecall's primitives: which mesh
axes an operand varies over, casting operands to vary alike, and outputs
that vary as their inputs do (a kernel's outputs depend on all its inputs).
Outside ``shard_map`` everything here is a no-op."""

from __future__ import annotations

import jax


def _varying(aval) -> frozenset:
    """The manual mesh axes (shard_map) an aval varies over."""
    return getattr(getattr(aval, "mat", None), "varying", None) or frozenset()


def varying_axes(x) -> frozenset:
    """The ``shard_map`` manual mesh axes array `x` varies over (JAX's
    ``check_vma``; empty outside ``shard_map``): its cotangents are summed
    over them in reverse mode::

        cutecall.jax.varying_axes(x)   # frozenset({'dp'}) inside shard_map
    """
    return _varying(jax.typeof(x))


def match_varying(args) -> list:
    """`args` cast to vary over the union of their manual axes, as JAX's
    own primitives are (so reverse mode sums the cotangents of invariant
    inputs over the axes). A no-op outside shard_map."""
    vmas = [_varying(jax.typeof(x)) for x in args]
    union = frozenset().union(*vmas)
    return [x if v == union else jax.lax.pcast(
        x, tuple(sorted(union - v, key=str)), to="varying")
        for x, v in zip(args, vmas)]


def with_varying(avals_in, out_avals) -> tuple:
    """`out_avals` varying over the manual axes of the inputs (a kernel's
    outputs depend on all its inputs)."""
    src = next((a for a in avals_in if _varying(a)), None)
    if src is None:
        return tuple(out_avals)
    mesh = src.sharding.mesh
    return tuple(o.update(manual_axis_type=src.mat,
                          sharding=jax.sharding.NamedSharding(
                              mesh, jax.sharding.PartitionSpec()))
                 for o in out_avals)
