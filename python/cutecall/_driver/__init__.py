"""The compile driver: what both fronts (``cutecall.jax``, ``cutecall.torch``)
share, and nothing that knows either of them. It turns a launcher and the
operands of one call into a compiled kernel and its launch plan, once per
specialization. Imports neither JAX nor torch at module level.

========================  =====================================================
module                    job
========================  =====================================================
``spec``                  ``TensorSpec``, operand specs, the plan's encoding
``signature``             reads a launcher's signature (stream, tensors, scalars)
``binding``               binds call arguments to launcher parameters
``layout``                divisibility classes of extents, strides, pointers
``fallback``              the static-layout ladder when the DSL rejects a form
``fingerprint``           content keys of launchers and kernel objects
``wrapper``               the generated ``@cute.jit`` wrapper (cutecall's ABI)
``compiled``              ``KernelSpec``, ``CompiledKernel``: what a compile is
``compiler``              compiles (serialized), the in-process cache, stats
``compile_error``         ``CompileError``: the DSL's failure, root cause first
``store_format``          the on-disk entry format, private dirs, file locks
``store``                 ``ArtifactStore``: content-addressed, atomic, verified
``kernel_cache``          the process's store: stamps, rejections, load/compile
``runtime``               finds the DSL runtime library, registers FFI targets
``dsl``                   CuTe DSL version shims and process-wide settings
========================  =====================================================

Data flows one way: a front calls the driver, the driver calls ``_core``.
"""
