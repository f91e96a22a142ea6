"""The compile driver: the one specialization pipeline every front shares,
and nothing that knows any framework (no module here imports JAX or torch,
at any depth: ``tests/test_package_layout.py`` checks every import).

A front describes its arrays (``operand.OperandDesc``) and calls
``pipeline.Launcher``, or gives ``launch_object.LaunchObject`` its
description step when a C++ launch object calls back on a miss; the driver
binds the call (placing outputs the call does not name where its kernel
writes them: the ``outputs`` stage), decides what is compiled in, builds the
one ``KernelSpec`` and key, compiles or loads it, and hands C++ a typed
entry (``_core.KernelEntry``, with its static masks).

Every module of the driver, roughly in the order a first call meets them
(``tests/test_package_layout.py`` checks that the map names each one):

========================  =====================================================
module                    job
========================  =====================================================
*entry points*
``pipeline``              ``Launcher``: bind, specialize, the ``KernelSpec``
``launch_object``         a C++ launch object: its outputs (asked once), the
                          call with outputs merged in, ``static=``/``dims=``;
                          its first call: bind once, the front describes,
                          specialize, the ``KernelEntry``
``launch_options``        a launch object's ``outputs=``, ``static=``,
                          ``dims=`` read against the parameters a call fills
``call_leaves``           the leaves C++ reads of a call, their uses and
                          static masks, the entry, the types it reads
*the launcher and the call*
``launcher_kind``         what a launcher is (a ``@cute.jit`` function, a
                          kernel object, a callable wrapping one)
``signature``             reads a launcher's signature: stream, tensors,
                          runtime scalars, constexprs
``scalars``               runtime scalars: which values are one, their ABI
                          bytes checked against the type's range
``fingerprint``           content fingerprints of launchers and constexprs
``source_digest``         digests of a function's or a class's source files
``binding``               binds one call's arguments to typed ``Slot`` values:
                          which parameter each argument fills
``binding_builder``       one argument read into its ``Slot`` (a pytree, a
                          runtime scalar, ``None``, a compile-time value)
``slots``                 ``Slot``, ``Binding``: what fills each parameter
``call_checks``           a call that fits no binding, said about the argument
                          (a scalar or tuple for a tensor, too many values,
                          ``None`` for a tensor that is not ``Optional``)
``pytree``                argument trees: containers, leaves, key paths
*what is compiled in*
``operand``               ``OperandDesc`` -> ``OperandSpec`` (the one
                          ``make_operand``), static masks, tied dims
``tensor_spec``           ``TensorSpec``: what a user asks of an array
``dtypes``                dtype names -> CuTe DSL types
``dtype_contract``        ``dtypes=``: the element types a call site declares
``layout``                divisibility classes of extents, strides, pointers
``fallback``              the static fallback's forms: guided, searched,
                          what each compiles in (the hint)
``fallback_climb``        ``climb``: the first form the DSL accepts
``key``                   the specialization key (one schema)
``plan``                  the launch plan's integer encoding
``target``                the target: arch, device properties, compile options
``devices``               the GPUs compiled for: SM count, shared memory, L2,
                          clusters (a table with sources; the driver's answers)
*compiling*
``compiled``              ``KernelSpec``, ``CompiledKernel``: what a compile is
``store``                 (a package) where kernels are kept: the process
                          (``store.memory``: the cache, the compile lock, the
                          counters), this machine's disk (``store.local``) and
                          a store shared by a cluster; its own map inside
``compiler``              one ``cute.compile``, validated by the C++ core
``hardware``              what a kernel reads of its GPU while built and
                          traced, answered from the target (``HardwareInfo``)
``wrapper``               the generated ``@cute.jit`` entry (cutecall's ABI)
``outputs``               (a package) the output placement stage: where a
                          call's outputs sit when it names none, asked with
                          traces before any compile; its own map
``compile_error``         ``CompileError``: the DSL's failure, the user's line
                          and the root cause first
``user_frames``           which frames are the user's (``user_stacklevel``,
                          ``user_location``, ``failing_source``)
``compile_locate``        invalid IR traced again with op locations: its line
``diagnosis``             a failed compile explained by the call's arguments
``progress``              a bar and a line while work is long: on a terminal,
                          in a notebook (``tqdm.auto``), as log lines
*around the pipeline*
``call_record``           a kernel as bundles record it (``JaxContract``)
``lazy_import``           a library's kernel modules imported without running
                          its package ``__init__`` (it runs when first needed)
``packs``                 prebuilt kernels a recipe finds without compiling
                          (a bundle and a table of recipe keys; read here)
``recipe``                a warm call keyed by what the caller asked for: the
                          recipe key (package files read from metadata) and
                          its record of kernels (no launcher, no DSL needed)
``runtime``               the DSL runtime library, launch blocking
``dsl``                   CuTe DSL version shims and process-wide settings
``flavour``               the DSL's CUDA flavour (cu12, cu13) this process runs
``log``                   the ``cutecall`` logger (``CUTECALL_LOG``)
========================  =====================================================

Data flows one way: a front calls the driver, the driver calls ``_core``.
"""
