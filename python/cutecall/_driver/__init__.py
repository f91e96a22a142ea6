"""The compile driver: the one specialization pipeline every front shares,
and nothing that knows any framework (no module here imports JAX or torch,
at any depth: ``tests/test_package_layout.py`` checks every import).

A front describes its arrays (``operand.OperandDesc``) and calls
``pipeline.Launcher``; the driver binds the call, decides what is compiled
in, builds the one ``KernelSpec`` and key, compiles or loads it, and hands
C++ a typed entry (``_core.KernelEntry``).

========================  =====================================================
module                    job
========================  =====================================================
``pipeline``              ``Launcher``: bind, specialize, the typed C++ entry
``signature``             reads a launcher's signature; runtime scalars
``binding``               binds one call's arguments to typed ``Slot`` values
``placement``             where the outputs sit among the parameters
``operand``               ``OperandDesc`` -> ``OperandSpec`` (the one
                          ``make_operand``), static masks, tied dims
``tensor_spec``           ``TensorSpec``: what a user asks of an array
``dtypes``                dtype names -> CuTe DSL types
``layout``                divisibility classes of extents, strides, pointers
``fallback``              the static-fallback ladder, the hint, the climb
``key``                   the specialization key (one schema)
``plan``                  the launch plan's integer encoding
``target``                the arch and compile options
``fingerprint``           content fingerprints of launchers and constexprs
``wrapper``               the generated ``@cute.jit`` entry (cutecall's ABI)
``compiled``              ``KernelSpec``, ``CompiledKernel``: what a compile is
``call_record``           a kernel as bundles record it (``JaxContract``)
``compiler``              one ``cute.compile``, validated by the C++ core
``compile_error``         ``CompileError``: the DSL's failure, root cause first
``store``                 (a package) where kernels are kept: the process
                          (``store.memory``: the cache, the compile lock, the
                          counters), this machine's disk (``store.local``) and
                          a store shared by a cluster; its own map inside
``runtime``               the DSL runtime library, launch blocking
``dsl``                   CuTe DSL version shims and process-wide settings
``log``                   the ``cutecall`` logger (``CUTECALL_LOG``)
========================  =====================================================

Data flows one way: a front calls the driver, the driver calls ``_core``.
"""
