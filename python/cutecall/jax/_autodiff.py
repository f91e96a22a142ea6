"""Differentiation of cutecall kernels: user kernels as the rules.

A kernel is a black box to JAX, so its derivatives are kernels too, given by
the user: :func:`differentiable` wraps a function of cutecall calls and takes

* ``defvjp(fwd, bwd)`` -- reverse mode: ``fwd`` runs the forward kernel(s)
  and returns the outputs and the residuals the user chooses to keep;
  ``bwd`` runs the backward kernel(s) on them;
* ``defjvp(jvp)`` -- forward mode: ``jvp`` runs the tangent kernel(s).

It is built on ``jax.custom_jvp``: the tangent map is a linear primitive,
``cutecall_linear``, whose transpose is ``bwd`` -- so ``jax.grad``, ``vjp``,
``jvp`` and ``linearize`` all work (the ones the given rules allow), under
``jit``, ``vmap`` and ``remat``, to any depth of composition.

Kernels with no rule raise a :class:`DifferentiationError` that says how to
add one (``no_jvp_rule``/``no_transpose_rule``, registered on
``cutecall_p``).
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching

from ._compat import Primitive, mlir
from ._varying import match_varying, with_varying

__all__ = ["differentiable", "Differentiable", "DifferentiationError"]

_HOW = ("wrap the function that calls it in cutecall.differentiable(f) and "
        "give its derivative kernels: .defvjp(fwd, bwd) for grad/vjp (reverse "
        "mode), .defjvp(jvp) for jvp (forward mode), both for linearize and "
        "everything (see docs/transforms.md)")


class DifferentiationError(NotImplementedError):
    """A cutecall kernel was differentiated without a rule for it."""


def no_jvp_rule(primals, tangents, *, kernel, **params):
    raise DifferentiationError(
        f"cutecall: kernel '{kernel.name}': Differentiation rule not "
        "implemented (JAX cannot see inside a CuTe DSL kernel). To "
        "differentiate through it, "
        + _HOW + ". To treat it as a constant, apply jax.lax.stop_gradient "
        "to its inputs.")


def no_transpose_rule(cts, *args, kernel, **params):
    raise DifferentiationError(
        f"cutecall: kernel '{kernel.name}' appears in a tangent computation "
        "that reverse mode (grad/vjp) must transpose, and cutecall cannot "
        "transpose a kernel: a defjvp rule alone serves forward mode only. "
        "Give the reverse-mode kernels too: cutecall.differentiable(f)"
        ".defvjp(fwd, bwd).")


# ---------------------------------------------------------------------------
# cutecall_linear: a tangent map with a user transpose

linear_p = Primitive("cutecall_linear")
linear_p.multiple_results = True


def _no_tangent_kernel(name: str):
    def fail(*_):
        raise DifferentiationError(
            f"cutecall: '{name}' has a reverse-mode rule (defvjp) but no "
            "forward-mode rule: jax.jvp, and evaluating the function "
            "jax.linearize returns, run tangent kernels; add them with "
            f"cutecall.differentiable(...).defjvp(jvp).")
    return fail


def _linear_impl(*args, fn, fn_t, num_res, out_avals, lin_avals, name):
    del fn_t, num_res, out_avals, lin_avals, name
    return fn(*args)


def _linear_abstract_eval(*avals, out_avals, **_):
    return with_varying(avals, out_avals)


def _linear_jvp(primals, tangents, *, num_res, **params):
    if any(type(t) is not ad.Zero for t in tangents[:num_res]):
        raise DifferentiationError(
            f"cutecall: '{params['name']}' is differentiated twice "
            "(a derivative of its derivative kernels): give its jvp/bwd "
            "functions their own cutecall.differentiable rules, or stop "
            "gradients through their residuals.")
    res, lin = primals[:num_res], primals[num_res:]
    out = linear_p.bind(*res, *lin, num_res=num_res, **params)
    lin_t = [ad.instantiate_zeros(t) for t in tangents[num_res:]]
    out_t = linear_p.bind(*res, *lin_t, num_res=num_res, **params)
    return out, out_t


def _linear_transpose(cts, *args, fn, fn_t, num_res, out_avals, lin_avals,
                      name):
    res, lin = args[:num_res], args[num_res:]
    if any(ad.is_undefined_primal(r) for r in res):
        raise DifferentiationError(
            f"cutecall: '{name}': its residuals depend on the value being "
            "differentiated in a second reverse pass; higher-order reverse "
            "mode is not supported")
    cts = [ad.instantiate_zeros(c) if type(c) is ad.Zero else c for c in cts]
    lin_cts = linear_p.bind(*res, *cts, fn=fn_t, fn_t=fn, num_res=num_res,
                            out_avals=lin_avals, lin_avals=out_avals,
                            name=name)
    return [None] * num_res + [c if ad.is_undefined_primal(x) else None
                               for c, x in zip(lin_cts, lin)]


def _linear_batch(axis_data, args, dims, *, fn, fn_t, num_res, out_avals,
                  lin_avals, name):
    size = axis_data.size
    res, lin = list(args[:num_res]), list(args[num_res:])
    res_dims = list(dims[:num_res])
    # Linear inputs all batched at 0 (so that the transposed map's
    # cotangents line up with them); residuals keep their dims.
    lin = [batching.bdim_at_front(x, d, size) for x, d in
           zip(lin, dims[num_res:])]

    def batched(f, n_lin):  # f(*res, *n_lin linear args), all batched at 0
        return jax.vmap(lambda *a: list(f(*a)), out_axes=0, axis_size=size,
                        in_axes=tuple(res_dims) + (0,) * n_lin)

    def grow(avals):
        return tuple(a.update(shape=(size,) + a.shape) for a in avals)

    outs = linear_p.bind(
        *res, *lin, fn=batched(fn, len(lin_avals)),
        fn_t=batched(fn_t, len(out_avals)), num_res=num_res,
        out_avals=grow(out_avals), lin_avals=grow(lin_avals), name=name)
    return outs, [0] * len(outs)


linear_p.def_impl(_linear_impl)
linear_p.def_abstract_eval(_linear_abstract_eval)
ad.primitive_jvps[linear_p] = _linear_jvp
ad.primitive_transposes[linear_p] = _linear_transpose
batching.fancy_primitive_batchers[linear_p] = _linear_batch
mlir.register_lowering(linear_p, mlir.lower_fun(
    _linear_impl, multiple_results=True))


# ---------------------------------------------------------------------------
# The public API

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
                "rules yet: " + _HOW)
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
            _no_tangent_kernel(self.name)
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
