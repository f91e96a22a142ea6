"""``cutecall.torch.kernel``: the torch front's one entry for ``@cute.jit``
launchers: a :class:`~cutecall.torch.Kernel`, or with ``recipe=`` a
:class:`~cutecall.torch.RecipeKernel` (found by what the caller asked for)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ._kernel import Kernel
from ._recipe import RecipeKernel


def kernel(launcher: Callable, *, outputs: int | Sequence[str] = 1,
           allocate: Callable | None = None, name: str | None = None,
           compile_options: str | None = None,
           static: bool | dict | None = None,
           static_fallback: bool | None = None, dims: dict | None = None,
           dtypes: dict | None = None, recipe: Any = None,
           recipe_packages: Sequence[str] = (), **constexprs: Any) -> Kernel | RecipeKernel:
    """Makes a ``@cute.jit`` launcher callable with torch tensors.

    Example::

        import torch, cutecall.torch
        from cutecall.examples.kernels import vector_add

        one_length = {"a": ("n",), "b": ("n",), "c": ("n",)}
        add = cutecall.torch.kernel(vector_add, dims=one_length)
        a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        out = torch.empty_like(a)
        add(a, b, out)                      # caller-allocated: returns None

        add2 = cutecall.torch.kernel(vector_add, dims=one_length,
                                     allocate=lambda a, b: torch.empty_like(a))
        out = add2(a, b)                    # the launch object allocates

    Args:
      launcher: a ``@cute.jit`` function taking the stream (a ``CUstream``
        parameter, or one named ``stream``; optional), ``cute.Tensor``
        parameters, runtime scalars annotated with a DSL type
        (``cutlass.Float32``...), and constexprs.
      outputs: how many tensor parameters the launcher writes (1), or
        their names. By number, they are the parameters the kernel writes,
        asked once by a trace of the DSL on the first call or
        ``k.compile(...)`` (a first call under ``torch.compile`` too, on its
        fake tensors), before anything compiles; before that, as cutecall's
        binding rule places them: tensor parameters without defaults right
        after the inputs, before any runtime scalars (QuACK's and FA4's
        convention). They are the ones ``torch.compile`` treats as mutated,
        and the ones ``allocate`` creates.
      allocate: ``allocate(*args) -> Tensor | tuple[Tensor, ...]``: makes the
        outputs from the call's arguments (e.g. ``torch.empty_like``); the
        call then omits them and returns them. Default None: the caller
        passes every tensor and the call returns None.
      name: the kernel's name in errors (default: the launcher's).
      compile_options: CuTe DSL compile options (``--gpu-arch`` defaults to
        the tensors' device; ``$CUTECALL_ARCH`` overrides).
      static: compile extents (and strides) in: ``True`` for every one of
        every tensor (one compile per shape and stride), or
        ``{parameter: True | per-dim bools}`` for some extents. Default:
        everything dynamic, and the static fallback decides.
      static_fallback: when the DSL rejects dynamic layouts, compile the
        fewest extents in that make the kernel compile (warning once,
        :class:`cutecall.StaticFallbackWarning`); ``False`` raises instead.
        Default: ``$CUTECALL_STATIC_FALLBACK`` (on unless ``0``).
      dims: ``{parameter: (name or None per dim)}`` ties extents across
        tensors, as ``TensorSpec(dims=)`` does in JAX: dims that share a
        name must be equal, checked in C++ before every launch (an error
        names both tensors, their dims and values). Without it the launcher
        knows only each tensor's own layout, not how they must agree.
      dtypes: ``{parameter: dtype or tuple of dtypes}``: the element types
        the tensors must have (``torch.float32``, ``"bfloat16"``,
        ``cutlass.Float32``; a key may name a leaf, ``"epilogue.mC"``). A
        ``cute.Tensor`` carries no element type: without it a float32
        kernel given an int32 tensor compiles for it and runs; with it the
        call raises a ``TypeError`` naming the argument, its dtype and the
        declared one, before anything compiles.
      recipe: hashable values that determine the kernel object (say
        ``("rmsnorm", "bfloat16", 4096)``): calls are then keyed by them
        (with the call's dtypes, ranks, scalars and None arguments, these
        options, the target, and the installed files of cutecall, the CuTe
        DSL and `recipe_packages`), and `launcher` may be a zero-argument
        function returning the launcher, called only on a miss. A call the
        artifact store (local or remote tier) or a pack knows launches the
        recorded kernel with neither `launcher` built nor the CuTe DSL
        imported; a miss builds it, takes the full path and records what it
        compiled. Returns a :class:`RecipeKernel` (``k.fn`` is None until a
        miss builds the launcher). ``CUTECALL_RECIPES=0``: every call takes
        the full path. Two recipes that build different kernels need
        different values.
      recipe_packages: the distributions (by name) the kernel's code comes
        from; a change to any of their installed files is a new recipe.
      **constexprs: compile-time values for the launcher's parameters.

    A recipe for a kernel library, so that a warm process (its store, or a
    pack, holding the kernel) needs neither the library nor the DSL::

        import torch, cutecall.torch

        def build():                      # runs on a miss only
            from cutecall.examples.kernels import vector_add
            return vector_add

        add = cutecall.torch.kernel(build, recipe=("vector_add", 1),
                                    name="vector_add",
                                    allocate=lambda a, b: torch.empty_like(a))
        a = torch.randn(4096, device="cuda")
        out = add(a, a)                   # a miss: compiled, recorded
        # a fresh process: the same lines launch the recorded kernel,
        # cutlass never imported (add.fn is None)

    One compile serves every shape and stride (views included) of a
    specialization: dtypes, ranks, the unit-stride dim, pointer alignment
    (16, 8, 4... bytes), the divisibility class of every extent and stride
    (the largest power of two dividing it, up to 16 bytes' worth of
    elements), 64-bit extents, device, and the constexprs. ``None`` passes
    ``None`` to an ``Optional`` tensor parameter. ``k.compile(*args)``
    compiles a specialization ahead of time, without a GPU. Calls
    run on ``torch.cuda.current_stream()`` of the tensors' device (captured
    by ``torch.cuda.graph``), on that device even when another is current.
    Runtime scalars are passed positionally; annotate them (``cutlass.Int32``,
    ``cutlass.Float32``...) to use the kernel under ``torch.compile``.
    """
    if recipe is not None:
        return RecipeKernel(launcher, recipe=recipe, packages=tuple(recipe_packages),
                            outputs=outputs, allocate=allocate, name=name,
                            compile_options=compile_options, static=static,
                            static_fallback=static_fallback, dims=dims, dtypes=dtypes,
                            **constexprs)
    return Kernel(launcher, outputs=outputs, allocate=allocate, name=name,
                  compile_options=compile_options, static=static,
                  static_fallback=static_fallback, dims=dims, dtypes=dtypes,
                  **constexprs)
