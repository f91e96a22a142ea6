"""ejkernel's CuTe call API, run by cutecall: a drop-in for

    from ejkernel.callib._cute_call import CAN_USE_CUTE, cute_call
    from ejkernel.callib._cute_ffi import (build_cute_ffi_call,
                                           has_cute_ffi_support)

Change those imports to ``from cutecall.ejkernel import ...`` and nothing
else. Kernels run through :func:`cutecall.cutlass_call` (cutecall's own XLA
FFI runtime: no TVM-FFI, no ``jax_tvm_ffi``). Where ejkernel has flaws this
module behaves better; ``docs/migrate/ejkernel.md`` lists every difference:

* the named call cache keys on the call's *content* (code, closure values,
  static parameters) as well as the name, so a name that misses a parameter
  can no longer hand back another kernel;
* ``jax.shard_map`` is detected from the abstract mesh of the trace (its
  manual axes), which works on current JAX (ejkernel's probe of private
  state silently fails there);
* the ``device=`` check raises (ejkernel's swallows its own AssertionError);
* the result is unflattened into ``out``'s (else ``out_shape``'s) tree, as
  documented, after a check of every leaf whose errors name the leaf (by
  key path), what was expected and what came back.

The code lives in ``cutecall.compat``: ``_ejkernel_ffi`` (build_cute_ffi_call,
has_cute_ffi_support) and ``_ejkernel_cute_call`` (cute_call, its one
cache -- a bounded LRU -- and its output contract).
"""

from .compat import _ejkernel_ffi
from .compat._ejkernel_cute_call import cute_call
from .compat._ejkernel_ffi import CuteFFICall, build_cute_ffi_call, has_cute_ffi_support

__all__ = ["cute_call", "build_cute_ffi_call", "has_cute_ffi_support",
           "CuteFFICall"]


def __getattr__(name: str):
    # ejkernel's module flags, computed on first use.
    if name in ("CAN_USE_CUTE", "CAN_USE_CUTE_PRIMITIVE"):
        return _ejkernel_ffi._dsl_import_error() is None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
