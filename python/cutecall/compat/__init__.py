"""Drop-in APIs of other bridges, run by cutecall's own runtime.

* ejkernel (``cutecall.ejkernel``): ``_ejkernel_ffi`` (``build_cute_ffi_call``),
  ``_ejkernel_cute_call`` (``cute_call``), ``_ejkernel_named_calls`` (its
  cache), ``_ejkernel_support`` (``has_cute_ffi_support``),
  ``_ejkernel_contract`` (the output contract);
* NVIDIA's ``cutlass.jax`` (``cutecall``'s own names, ``cutecall.testing``):
  ``_nvidia_names``;
* Helion's CuTe launcher lives with the torch front
  (``cutecall.torch.default_cute_launcher``).
"""
