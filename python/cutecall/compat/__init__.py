"""Drop-in APIs of other bridges, run by cutecall's own runtime.

* ejkernel (``cutecall.ejkernel``): ``_ejkernel_ffi`` (``build_cute_ffi_call``,
  ``has_cute_ffi_support``), ``_ejkernel_cute_call`` (``cute_call``:
  placement, its named call cache), ``_ejkernel_outputs`` (its output
  contract), ``_ejkernel_keys`` (content keys of callables, both APIs);
* NVIDIA's ``cutlass.jax`` (``cutecall``'s own names, ``cutecall.testing``):
  ``_nvidia_names`` (availability, the compile cache, FFI targets) and
  ``_nvidia_types`` (dtypes, layout orders, arrays);
* Helion's CuTe launcher lives with the torch front
  (``cutecall.torch.default_cute_launcher``).
"""
