"""``cutecall.compile``: one specialization compiled without running it,
with its JAX call contract (a :class:`~cutecall.jax.CompiledCall`, what
bundles store): the call is traced, and the contract read from its one
``cutecall_call`` equation and the user's ``output_shape_dtype``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._driver import scalars as _scalars
from .._driver.call_record import JaxContract
from .._driver.log import logger
from ._contract import CompiledCall, batch_tuple

__all__ = ["compile"]


def _find_call(jaxpr):
    """The one cutecall_call equation in a traced jaxpr (searching nested
    jaxprs: transformation rules may wrap it)."""
    from ._primitive import cutecall_p
    found = []

    def visit(j):
        j = getattr(j, "jaxpr", j)
        for eqn in j.eqns:
            if eqn.primitive is cutecall_p:
                found.append(eqn)
            for v in eqn.params.values():
                for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                    if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None),
                                                       "eqns"):
                        visit(sub)
    visit(jaxpr)
    if len(found) != 1:
        raise RuntimeError(f"cutecall: expected one kernel call in the trace, "
                           f"found {len(found)}")
    return found[0]


def _output_rules(call, args, out_avals, aliases) -> list:
    """Per output: a shape rule (ints and (input, dim) pairs), or None. Found
    by calling the user's ``output_shape_dtype`` on inputs whose dims are
    symbols, then checked against the example."""
    def is_array(x):
        return hasattr(x, "shape") and hasattr(x, "dtype") and \
            not _scalars.is_scalar_value(x)

    leaves, tree = jax.tree.flatten(
        list(args), is_leaf=lambda x: x is None or _scalars.is_scalar_value(x))
    example = [tuple(x.shape) for x in leaves if is_array(x)]
    where = {f"cc_in{k}_{d}": (k, d) for k, s in enumerate(example)
             for d in range(len(s))}
    rules: list = [None] * len(out_avals)
    fn = call.output_shape_dtype
    if callable(fn) and not isinstance(fn, jax.ShapeDtypeStruct):
        syms = iter(jax.export.symbolic_shape(",".join(where)) if where else ())
        stand_ins = [jax.ShapeDtypeStruct(tuple(next(syms) for _ in x.shape), x.dtype)
                     if is_array(x) else x for x in leaves]
        fn = _symbolic_outputs(call, fn, jax.tree.unflatten(tree, stand_ins))
    for j, o in enumerate(jax.tree.leaves(fn)):
        rule = tuple(int(d) if isinstance(d, (int, np.integer)) else
                     where.get(str(d)) for d in o.shape)
        if j < len(rules) and None not in rule:
            rules[j] = rule
    for a, b in aliases:  # an aliased output has its input's shape
        rules[b] = tuple((a, d) for d in range(len(out_avals[b].shape)))
    for j, rule in enumerate(rules):  # a rule must reproduce the example
        if rule is not None:
            got = tuple(d if isinstance(d, int) else example[d[0]][d[1]]
                        for d in rule)
            if got != tuple(out_avals[j].shape):
                rules[j] = None
    return rules


def _symbolic_outputs(call, fn, stand_ins) -> Any:
    """The user's output_shape_dtype on inputs whose dims are symbols, or ()
    (no rules: calls give ``output_shape_dtype=``) when it cannot take
    symbols -- it compares or converts a dim, say. Logged, not hidden."""
    try:
        return fn(*stand_ins)
    except (jax.errors.InconclusiveDimensionOperation, TypeError, ValueError,
            AssertionError) as e:
        logger.info("kernel '%s': output_shape_dtype is not a rule over input "
                    "dims (%s: %s); calls of the compiled kernel pass "
                    "output_shape_dtype=", call.name, type(e).__name__, e)
        return ()


def compile(fn, *example_args, name: str | None = None,
            **kwargs) -> CompiledCall:
    """Compiles one specialization without running it (no GPU needed).

    Example::

        add = cutecall.cutlass_call(vector_add, output_shape_dtype=like_first)
        spec = cutecall.compile(add, jax.ShapeDtypeStruct((1024,), jnp.float32),
                                jax.ShapeDtypeStruct((1024,), jnp.float32))
        cutecall.export("kernels.bundle", {"vector_add": spec})

    Args:
      fn: a :class:`CutlassCall` (then ``kwargs`` are call-time keyword
        arguments: runtime scalars), or a launcher (then ``kwargs`` go to
        :func:`cutlass_call`: ``output_shape_dtype``, specs, constexprs...).
      *example_args: the call's arguments as arrays or
        ``jax.ShapeDtypeStruct``s, and example runtime scalar values. Scalar
        values are examples only; a concrete dim stands for its
        divisibility class (4096 f32: every multiple of 4), a symbolic one
        (``jax.export.symbolic_shape``) for every extent.
      name: the :class:`CompiledCall`'s name (default: the kernel's).

    Returns:
      A :class:`CompiledCall`: ``.kernel`` is the :class:`CompiledKernel`.
      Output shapes are recorded as rules over input dims when
      ``output_shape_dtype`` is a constant or a function that builds them
      from input dims and constants; otherwise calls pass
      ``output_shape_dtype=``.
    """
    from ._api import cutlass_call
    from ._call import CutlassCall
    if isinstance(fn, CutlassCall):
        call, call_kwargs = fn, kwargs
    else:
        call, call_kwargs = cutlass_call(fn, **kwargs), {}
    traced = call.trace(*example_args, **call_kwargs)
    eqn = _find_call(traced.jaxpr)
    p = eqn.params
    out_avals = p["out_avals"]
    rules = _output_rules(call, example_args, out_avals, p["aliases"])
    contract = JaxContract(
        inputs=tuple((np.dtype(v.aval.dtype).name, len(v.aval.shape))
                     for v in eqn.invars),
        outputs=tuple((np.dtype(o.dtype).name, r)
                      for o, r in zip(out_avals, rules)),
        single_output=jax.tree_util.treedef_is_leaf(
            jax.tree.structure(traced.traced.out_info)),
        aliases=tuple(tuple(a) for a in p["aliases"]),
        in_layouts=tuple(tuple(x) for x in p["in_layouts"]),
        out_layouts=tuple(tuple(x) for x in p["out_layouts"]),
        allow_cuda_graph=bool(p["allow_cuda_graph"]), batch=batch_tuple(p.get("batch")))
    kernel = p["kernel"]
    return CompiledCall(name or kernel.name, kernel, traced.scalars, contract)


