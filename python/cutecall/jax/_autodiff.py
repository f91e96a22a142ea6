"""Differentiation of cutecall kernels: user kernels as the rules.

A kernel is a black box to JAX, so its derivatives are kernels too, given by
the user: :func:`differentiable` wraps a function of cutecall calls and takes

* ``defvjp(fwd, bwd)`` -- reverse mode: ``fwd`` runs the forward kernel(s)
  and returns the outputs and the residuals the user chooses to keep;
  ``bwd`` runs the backward kernel(s) on them;
* ``defjvp(jvp)`` -- forward mode: ``jvp`` runs the tangent kernel(s).

It is built on ``jax.custom_jvp``: the tangent map is a linear primitive,
``cutecall_linear`` (``_ad_rules``), whose transpose is ``bwd`` -- so ``jax.grad``, ``vjp``,
``jvp`` and ``linearize`` all work (the ones the given rules allow), under
``jit``, ``vmap`` and ``remat``, to any depth of composition.

Kernels with no rule raise a :class:`DifferentiationError` that says how to
add one (``_ad_rules``: ``no_jvp_rule``/``no_transpose_rule``, registered
on ``cutecall_p``).
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp

from ._ad_rules import HOW_TO_DIFFERENTIATE, DifferentiationError, linear_p, no_tangent_kernel
from ._varying import match_varying

__all__ = ["differentiable", "Differentiable"]



def _tangent_aval(x):
    aval = jax.typeof(x)
    if jnp.issubdtype(aval.dtype, jnp.inexact):
        return aval.update(weak_type=False)
    return aval.update(dtype=jax.dtypes.float0, weak_type=False)


class Differentiable:
    """A function of cutecall kernels with user derivative kernels.

    Created by :func:`differentiable`; call it like the function it wraps.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        if not callable(fun):
            raise TypeError(f"cutecall.differentiable: fun must be callable, "
                            f"got {type(fun).__name__}: {fun!r}")
        self.fun = fun
        self.name = getattr(fun, "name", None) or \
            getattr(fun, "__name__", type(fun).__name__)
        self.nondiff_argnums = tuple(nondiff_argnums)
        self._fwd = self._bwd = self._jvp = None
        self._build()
        functools.update_wrapper(self, fun, updated=())

    def defvjp(self, fwd: Callable, bwd: Callable) -> "Differentiable":
        """Reverse mode. ``fwd(*args) -> (outputs, residuals)`` runs the
        forward kernel(s) and keeps any pytree of residuals;
        ``bwd(*nondiff_args, residuals, output_cotangents) -> tuple`` returns
        one cotangent per differentiable argument (``None`` for zero).
        Same contract as ``jax.custom_vjp.defvjp``. Returns self."""
        for what, f in (("fwd", fwd), ("bwd", bwd)):
            if not callable(f):
                raise TypeError(f"cutecall.differentiable('{self.name}')."
                                f"defvjp: {what} must be callable, got {f!r}")
        self._fwd, self._bwd = fwd, bwd
        self._build()
        return self

    def defjvp(self, jvp: Callable) -> "Differentiable":
        """Forward mode. ``jvp(*nondiff_args, primals, tangents) ->
        (outputs, output_tangents)``, the output tangents linear in
        ``tangents`` (tuples, one entry per differentiable argument). Same
        contract as ``jax.custom_jvp.defjvp``. Returns self."""
        if not callable(jvp):
            raise TypeError(f"cutecall.differentiable('{self.name}').defjvp: "
                            f"jvp must be callable, got {jvp!r}")
        self._jvp = jvp
        self._build()
        return self

    def __call__(self, *args):
        return self._call(*args)

    # -- wiring ----------------------------------------------------------
    def _build(self):
        call = jax.custom_jvp(self.fun, nondiff_argnums=self.nondiff_argnums)
        if self._fwd is None and self._jvp is not None:
            call.defjvp(self._jvp)        # forward mode only
        else:
            call.defjvp(self._rule)       # through cutecall_linear
        self._call = call

    def _rule(self, *args):
        nondiff, (primals, tangents) = args[:-2], args[-2:]
        if self._fwd is None:
            raise DifferentiationError(
                f"cutecall: '{self.name}' is a cutecall.differentiable with no "
                "rules yet: " + HOW_TO_DIFFERENTIATE)
        full = self._full_args(nondiff, primals)
        out, res = self._fwd(*full)
        out_flat, out_tree = jax.tree.flatten(out)
        res_flat, res_tree = jax.tree.flatten(res)
        prim_flat, prim_tree = jax.tree.flatten(primals)
        tan_flat = jax.tree.leaves(tangents)
        n_res = len(res_flat) + len(prim_flat)
        lin_avals = tuple(_tangent_aval(p) for p in prim_flat)
        out_avals = tuple(_tangent_aval(o) for o in out_flat)

        def tangent_map(*flat):
            r, t = flat[:n_res], flat[n_res:]
            p = jax.tree.unflatten(prim_tree, r[len(res_flat):])
            _, t_out = self._jvp(*nondiff, p,
                                 jax.tree.unflatten(prim_tree, list(t)))
            return jax.tree.leaves(t_out)

        def transpose_map(*flat):
            r, ct = flat[:n_res], flat[n_res:]
            cts = self._bwd(*nondiff, jax.tree.unflatten(res_tree, r[:len(res_flat)]),
                            jax.tree.unflatten(out_tree, list(ct)))
            return self._check_cts(cts, prim_tree, prim_flat)

        fn = tangent_map if self._jvp is not None else \
            no_tangent_kernel(self.name)
        args = match_varying([*res_flat, *prim_flat, *tan_flat])
        t_out = linear_p.bind(*args, fn=fn,
                              fn_t=transpose_map, num_res=n_res,
                              out_avals=out_avals, lin_avals=lin_avals,
                              name=self.name)
        return out, jax.tree.unflatten(out_tree, t_out)

    def _full_args(self, nondiff, primals):
        args, nd, pr = [], iter(nondiff), iter(primals)
        for i in range(len(nondiff) + len(primals)):
            args.append(next(nd) if i in self.nondiff_argnums else next(pr))
        return args

    def _check_cts(self, cts, prim_tree, prim_flat):
        args = prim_tree.children()
        if not isinstance(cts, (tuple, list)) or len(cts) != len(args):
            raise TypeError(
                f"cutecall: bwd of '{self.name}' must return a tuple with one "
                f"cotangent per differentiable argument ({len(args)}), got "
                f"{type(cts).__name__}: {cts!r}")
        flat = []
        for sub, p in zip(cts, args):
            want = p.num_leaves
            leaves = [None] * want if sub is None else \
                jax.tree.leaves(sub, is_leaf=lambda x: x is None)
            if len(leaves) != want:
                raise TypeError(f"cutecall: bwd of '{self.name}' returned "
                                f"{len(leaves)} cotangent leaves for an "
                                f"argument with {want}")
            flat += leaves
        out = []
        for c, p in zip(flat, prim_flat):
            if c is None:
                out.append(jnp.zeros(jnp.shape(p), jnp.result_type(p)))
            elif jnp.shape(c) != jnp.shape(p):
                raise ValueError(f"cutecall: bwd of '{self.name}' returned a "
                                 f"cotangent of shape {jnp.shape(c)} for an "
                                 f"argument of shape {jnp.shape(p)}")
            else:
                out.append(c)
        return out


def differentiable(fun: Callable, *, nondiff_argnums: Sequence[int] = ()
                   ) -> Differentiable:
    """Makes a function of cutecall kernels differentiable with user kernels.

    Example (residuals chosen by the user; the rules are kernels too)::

        import cutecall
        from cutecall.examples import autodiff as ex

        mul = cutecall.differentiable(ex.mul)          # z = x * y
        mul.defvjp(
            lambda x, y: (ex.mul(x, y), (x, y)),        # fwd: outputs, residuals
            lambda res, g: (ex.mul(g, res[1]), ex.mul(g, res[0])))  # bwd
        mul.defjvp(lambda p, t: (ex.mul(*p),
                                 ex.fma(t[0], p[1], ex.mul(p[0], t[1]))))
        jax.grad(lambda x, y: mul(x, y).sum())(x, y)    # runs the bwd kernels

    What works with which rules:

    ===============  ====================  ==============  ===============
    given            grad / vjp            jvp             linearize
    ===============  ====================  ==============  ===============
    defvjp           yes (bwd kernels)     raises          builds; raises
                                                           when evaluated
    defjvp           raises (cannot        yes             yes
                     transpose a kernel)
    both             yes                   yes             yes
    ===============  ====================  ==============  ===============

    All of these compose with ``jax.jit``, ``jax.vmap`` (the kernels batch
    as declared by their ``batch_modes``) and ``jax.checkpoint``. Errors name
    the function and what rule to add.

    Args:
      fun: the primal function: any callable of arrays, usually a
        :class:`CutlassCall` or a function calling several.
      nondiff_argnums: positions of arguments that are not differentiated
        (e.g. runtime scalars passed on to kernels); passed to the rules
        first, as in ``jax.custom_jvp``.

    Returns:
      A :class:`Differentiable`: call it like ``fun``; add rules with
      ``.defvjp(fwd, bwd)`` and ``.defjvp(jvp)`` (each returns it).
    """
    return Differentiable(fun, nondiff_argnums)
