"""The JAX primitive ``cutecall_call`` and its lowering.

One primitive for every kernel: its params carry the compiled kernel
(content-hashed), so JAX's own caches key on kernel content. The lowering
emits a typed FFI custom call whose attributes hold the object bytes, their
SHA-256, the function prefix, the launch plan and the call's runtime scalar
values (raw 8-byte slots, ``scalars``): compiled executables and
``jax.export`` artifacts are self-contained.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax._src import dispatch
from jax.interpreters import ad, batching

from . import _ad_rules, _batching
from ._varying import with_varying
from . import _targets
from ._compat import Primitive, mlir

cutecall_p = Primitive("cutecall_call")
cutecall_p.multiple_results = True
cutecall_p.def_impl(functools.partial(dispatch.apply_primitive, cutecall_p))


@cutecall_p.def_abstract_eval
def _abstract_eval(*avals, kernel, scalars, out_avals, aliases,
                   allow_cuda_graph, in_layouts, out_layouts, batch=None):
    del kernel, scalars, aliases, allow_cuda_graph, in_layouts
    del out_layouts, batch
    return with_varying(avals, out_avals)


def _cuda_lowering(ctx, *args, kernel, scalars, out_avals, aliases,
                   allow_cuda_graph, in_layouts, out_layouts, batch=None):
    del out_avals, batch  # batch: the vmap declaration (_batching)
    target = _targets.TARGET if allow_cuda_graph else _targets.TARGET_NO_GRAPH
    rule = jax.ffi.ffi_lowering(
        target,
        operand_layouts=list(in_layouts),
        result_layouts=list(out_layouts),
        operand_output_aliases=dict(aliases) or None,
    )
    return rule(ctx, *args, module=kernel.module, key=kernel.sha256,
                function=kernel.function, kernel=kernel.name,
                plan=kernel.plan_array, operands=kernel.operand_names,
                symbols=kernel.symbol_names,
                scalars=np.asarray(scalars, dtype=np.int64))


def _unsupported_lowering(ctx, *args, kernel, **params):
    platforms = getattr(ctx.module_context, "platforms", None) or ["?"]
    raise NotImplementedError(
        f"cutecall: kernel '{kernel.name}' runs only on CUDA GPUs, but this "
        f"computation is lowered for {', '.join(platforms)}. Put the inputs on "
        "a GPU, or inspect the lowered call with "
        "jax.jit(f).trace(*args).lower(lowering_platforms=('cuda',)).")


mlir.register_lowering(cutecall_p, _unsupported_lowering)
mlir.register_lowering(cutecall_p, _cuda_lowering, platform="cuda")

# Transformation rules: vmap folds or loops (_batching); differentiation goes
# through user-paired kernels (_autodiff), so the bare primitive's rules
# raise an error that says how to add one.
batching.fancy_primitive_batchers[cutecall_p] = functools.partial(
    _batching.batch_rule, cutecall_p)
ad.primitive_jvps[cutecall_p] = _ad_rules.no_jvp_rule
ad.primitive_transposes[cutecall_p] = _ad_rules.no_transpose_rule
