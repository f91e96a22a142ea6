"""JAX's differentiation rules for cutecall's primitives.

``cutecall_p`` (a kernel) has none: its jvp and transpose rules raise a
:class:`DifferentiationError` that says how to add one (``no_jvp_rule``,
``no_transpose_rule``). ``cutecall_linear`` is the tangent map of a
``cutecall.differentiable`` (``_autodiff``) as a linear primitive whose
transpose is the user's ``bwd``: its impl and abstract eval, its jvp (the
map applied to tangents), its transpose (the map and its transpose
swapped), its vmap rule and its lowering (the map's own).
"""

from __future__ import annotations

import jax
from jax.interpreters import ad, batching

from ._compat import Primitive, mlir
from ._varying import with_varying

HOW_TO_DIFFERENTIATE = (
    "wrap the function that calls it in cutecall.differentiable(f) and "
    "give its derivative kernels: .defvjp(fwd, bwd) for grad/vjp (reverse "
    "mode), .defjvp(jvp) for jvp (forward mode), both for linearize and "
    "everything (see docs/transforms.md)")


class DifferentiationError(NotImplementedError):
    """A cutecall kernel was differentiated without a rule for it."""


def no_jvp_rule(primals, tangents, *, kernel, **params):
    raise DifferentiationError(
        f"cutecall: kernel '{kernel.name}': Differentiation rule not "
        "implemented (JAX cannot see inside a CuTe DSL kernel). To "
        "differentiate through it, " + HOW_TO_DIFFERENTIATE + ". To treat it as a "
        "constant, apply jax.lax.stop_gradient to its inputs.")


def no_transpose_rule(cts, *args, kernel, **params):
    raise DifferentiationError(
        f"cutecall: kernel '{kernel.name}' appears in a tangent computation "
        "that reverse mode (grad/vjp) must transpose, and cutecall cannot "
        "transpose a kernel: a defjvp rule alone serves forward mode only. "
        "Give the reverse-mode kernels too: cutecall.differentiable(f)"
        ".defvjp(fwd, bwd).")


def no_tangent_kernel(name: str):
    def fail(*_):
        raise DifferentiationError(
            f"cutecall: '{name}' has a reverse-mode rule (defvjp) but no "
            "forward-mode rule: jax.jvp, and evaluating the function "
            "jax.linearize returns, run tangent kernels; add them with "
            f"cutecall.differentiable(...).defjvp(jvp).")
    return fail


# ---------------------------------------------------------------------------
# cutecall_linear: a tangent map with a user transpose

linear_p = Primitive("cutecall_linear")
linear_p.multiple_results = True


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
