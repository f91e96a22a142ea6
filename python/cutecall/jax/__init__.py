"""The JAX front: CuTe DSL kernels as JAX operations.

========================  =====================================================
module                    job
========================  =====================================================
``_call``                 ``cutlass_call``: binds, specializes, compiles, binds
                          the primitive (NVIDIA's ``cutlass.jax`` API)
``_args``                 operand specs and aliases of one call
``_primitive``            the ``cutecall_call`` primitive and its lowering to a
                          typed XLA FFI custom call
``_varying``              ``shard_map`` varying axes of operands and results
``_batching``             ``vmap``: fold into a kernel mode, else a loop
``_autodiff``             ``differentiable``: user-paired forward/backward kernels
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
from ._autodiff import Differentiable, DifferentiationError, differentiable
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
