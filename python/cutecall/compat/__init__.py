"""Drop-in APIs of other bridges, run by cutecall's own runtime.

* ejkernel (``cutecall.ejkernel``): ``_ejkernel_ffi`` (``build_cute_ffi_call``,
  ``has_cute_ffi_support``, content keys), ``_ejkernel_cute_call``
  (``cute_call``: placement, its named call cache, its output contract);
* NVIDIA's ``cutlass.jax`` (``cutecall``'s own names, ``cutecall.testing``):
  ``_nvidia_names``;
* Helion's CuTe launcher lives with the torch front
  (``cutecall.torch.default_cute_launcher``).
"""
