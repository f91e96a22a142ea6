"""The JAX front: CuTe DSL kernels as JAX operations.

========================  =====================================================
module                    job
========================  =====================================================
``_call``                 ``cutlass_call``: binds, specializes, compiles, binds
                          the primitive (NVIDIA's ``cutlass.jax`` API)
``_args``                 the description step: a bound call's arrays as
                          operand descriptions; runtime scalars, XLA layouts
``_specs``                ``input_spec``/``output_spec``: one spec per array
``_aliases``              ``input_output_aliases``: checked, resolved to leaves
``_recipe``               ``RecipeCall``: ``cutlass_call(..., recipe=...)``
``_recipe_find``          a recipe call's lookups (key, fitting variant) and
                          records
``_primitive``            the ``cutecall_call`` primitive and its lowering to a
                          typed XLA FFI custom call
``_varying``              ``shard_map`` varying axes of operands and results
``_batching``             ``vmap``: fold into a kernel mode, else a loop
``_autodiff``             ``differentiable``: user-paired forward/backward kernels
``_ad_rules``             differentiation rules: none for a kernel (the error
                          says how to add one); ``cutecall_linear``, the
                          tangent map with the user's transpose
``_contract``             ``compile``/``register``: ``jax.export`` contracts
``_compat``               JAX version shims
========================  =====================================================

Example::

    import jax, jax.numpy as jnp, cutecall
    from cutecall.examples import kernels
    add = cutecall.jax.cutlass_call(kernels.vector_add,
                                    output_shape_dtype=lambda a, b: a)
    print(jax.jit(add).trace(jnp.ones(8), jnp.ones(8)).lower(
        lowering_platforms=("cuda",)).as_text()[:200])
"""

from . import _cache
from ._ad_rules import DifferentiationError
from ._autodiff import Differentiable, differentiable
from ._batching import BatchModes, VmapFallbackWarning
from ._api import cutlass_call
from ._call import CutlassCall, TracedCall
from ._recipe import RecipeCall
from ._compile import compile
from ._contract import CompiledCall, jax_export_checks, register
from ._varying import varying_axes

__all__ = ["cutlass_call", "CutlassCall", "RecipeCall", "TracedCall", "differentiable",
           "Differentiable",
           "DifferentiationError", "BatchModes", "VmapFallbackWarning",
           "CompiledCall", "compile", "jax_export_checks", "register", "varying_axes"]

_cache.share_from_env()     # CUTECALL_CACHE_JAX: JAX's cache beside the remote tier
