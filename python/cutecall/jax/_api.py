"""``cutecall.cutlass_call``: the JAX front's public face. It checks the
call site's options and makes a :class:`~cutecall.jax.CutlassCall`, or a
:class:`~cutecall.jax.RecipeCall` when a recipe is given."""

from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, Mapping, Sequence

from . import _specs, _targets
from ._call import CutlassCall
from ._recipe import RecipeCall

__all__ = ["cutlass_call"]


def cutlass_call(fn: Callable, *, output_shape_dtype: Any = None,
                 input_spec: Any = None, output_spec: Any = None,
                 input_mode: Any = None, output_mode: Any = None,
                 input_output_aliases: Mapping | None = None,
                 allow_cuda_graph: bool = True,
                 ffi_call_target: str | None = None,
                 compile_options: str | None = None,
                 compile_key: Hashable | None = None,
                 use_static_tensors: bool = False,
                 operand_order: str = "inputs_first",
                 name: str | None = None,
                 batch_modes: Any = None,
                 static_fallback: bool | None = None,
                 output_params: Sequence[str] | None = None,
                 recipe: Hashable | None = None,
                 recipe_packages: Sequence[str] = (),
                 dtypes: Mapping | None = None,
                 **constexprs) -> CutlassCall:
    """Wraps a CuTe DSL launcher as a JAX-callable kernel.

    A drop-in for NVIDIA's ``cutlass.jax.cutlass_call`` (same arguments and
    meaning), with dynamic shapes by default, runtime scalars, free launcher
    signatures and per-dim control. Example::

        import jax, jax.numpy as jnp, cutecall
        from cutecall.examples.kernels import vector_add

        n = cutecall.TensorSpec(dims=("n",))   # a, b, c: one length
        add = cutecall.cutlass_call(
            vector_add,
            output_shape_dtype=jax.ShapeDtypeStruct((4096,), jnp.float32),
            input_spec=n, output_spec=n)
        c = add(a, b)               # eager
        c = jax.jit(add)(a, b)      # or inside any jitted program

    Args:
      fn: a ``@cute.jit`` launcher (or a lambda/function calling one). Its
        parameters are read from its signature: the stream (annotated
        ``cuda.CUstream`` or named ``stream``; first, last, anywhere or
        absent -- launches that name no stream go on XLA's stream), the
        call's arguments then the outputs (``operand_order="outputs_first"``
        swaps them), runtime scalars (annotated ``cutlass.Float32``,
        ``Int32``, ``Int64``, ``Boolean``... or any Python scalar passed to
        the call) and keyword-only constexprs. Arrays arrive as
        ``cute.Tensor`` views, lists/tuples of arrays as lists/tuples of
        tensors, ``None`` as ``None`` (``Optional`` tensor parameters).
      output_shape_dtype: a ``jax.ShapeDtypeStruct`` or a pytree of them;
        or a function of the call's arguments returning one.
      input_spec, output_spec: a :class:`TensorSpec` for all arrays, or one
        per array (a flat sequence or a pytree mirroring the arguments;
        ``None`` entries take the default; a bare int tuple is a mode). Dims
        are runtime values, row-major, 16-byte aligned unless a spec says
        otherwise.
      input_mode, output_mode: deprecated (NVIDIA's); a mode per array. Use
        ``TensorSpec(mode=...)``.
      input_output_aliases: ``{input: output}``: ints select top-level
        arguments and outputs (whole pytrees; the output is not passed to
        ``fn``, which writes through the input), key paths select single
        leaves (the output leaf reaches ``fn`` as ``None``). Donate the input
        to avoid a copy.
      allow_cuda_graph: when False, XLA never captures this call in a CUDA
        graph (command buffer).
      ffi_call_target: accepted for compatibility; must name one of
        cutecall's own targets (cutecall implements its ABI, not NVIDIA's).
      compile_options: a ``cute.compile`` options string; ``--gpu-arch`` picks
        the target (default: $CUTECALL_ARCH, the visible GPU, else sm_90a).
      compile_key: an extra hashable component of the compile key (the key
        is always the content: launcher source, specs, constexprs, options).
      use_static_tensors: bake every extent in (one compile per shape);
        ``TensorSpec.static`` overrides it per array.
      operand_order: ``"inputs_first"`` (default) or ``"outputs_first"``: the
        order of the launcher's array parameters.
      name: the kernel name used in errors and the HLO (default: fn's name).
      batch_modes: how ``jax.vmap`` runs the kernel. A
        :class:`cutecall.BatchModes` (or an int, the same dim for every
        array and output) declares which dim of each array can carry a
        batch: vmap folds the batch into it and launches once. ``None``
        (default): one launch per batch element, with a one-time
        :class:`cutecall.VmapFallbackWarning` saying how to opt in;
        ``"loop"``: the same without the warning. See docs/transforms.md.
      output_params: the names of the launcher parameters that receive the
        outputs, in output order (cutecall's addition). Default: the
        parameters the kernel writes, read from a trace of the DSL before the
        compile, wherever they sit (QuACK's cross-entropy backward writes
        ``mdX`` between inputs); where that says nothing, the binding rule
        -- tensor parameters right after the last array argument, before
        runtime scalars; a kernel whose writes the trace cannot tie to a
        parameter (inline PTX at an address it lost) is refused, asking for
        this argument (docs/specialization.md, "How outputs are found").
      static_fallback: when the DSL rejects the kernel with dynamic layouts
        (e.g. ``dynamic layout doesn't support load``), compile it with
        static shapes instead -- NVIDIA's default -- and warn once
        (:class:`cutecall.StaticFallbackWarning`). ``False`` raises the
        ``CompileError`` instead. Default: ``$CUTECALL_STATIC_FALLBACK``
        (on unless ``0``).
      dtypes: the element types the arrays must have, per launcher
        parameter (or array leaf: ``"epilogue_args.mC"``), outputs included:
        ``{"a": "float32", "b": jnp.float32, "c": cutlass.Float32}``, or a
        tuple of allowed dtypes. A ``cute.Tensor`` carries no element type,
        so without it a float32 kernel given int32 arrays compiles for them
        and runs; with it that call raises a ``TypeError`` naming the
        argument, its dtype and the declared one, before anything compiles.
      recipe, recipe_packages: a warm path without ``fn``'s library or the
        CuTe DSL: ``fn`` then *builds* the launcher, only when no store holds
        a kernel for the recipe (see :class:`cutecall.jax.RecipeCall`).
      **constexprs: compile-time keyword arguments passed to ``fn``; part of
        the compile key, so they must be hashable Python values. Values given
        here are compile-time; values given to the call are runtime, except
        at ``cutlass.Constexpr`` parameters not given here, which take the
        call's positional values where the launcher's authors pass them
        (``call(gemm_op, a, b, epilogue)``: objects and callables too),
        compiled in. An object a compile fills in (a GEMM object's layouts)
        keeps the key it had before.

    Returns:
      A :class:`CutlassCall`; call it with the arguments (arrays, pytrees,
      ``None``, runtime scalars positionally or by keyword).
    """
    input_spec = _specs.deprecated_mode(input_spec, input_mode, "input")
    output_spec = _specs.deprecated_mode(output_spec, output_mode, "output")
    if ffi_call_target is not None:
        allow_cuda_graph = _targets.graph_target(ffi_call_target)
    cls = CutlassCall if recipe is None else \
        functools.partial(RecipeCall, recipe=recipe, packages=recipe_packages)
    return cls(
        fn, output_shape_dtype=output_shape_dtype, input_spec=input_spec,
        output_spec=output_spec, input_output_aliases=input_output_aliases,
        allow_cuda_graph=allow_cuda_graph, compile_options=compile_options,
        compile_key=compile_key, use_static_tensors=use_static_tensors,
        operand_order=operand_order, name=name, constexprs=constexprs,
        batch_modes=batch_modes, static_fallback=static_fallback,
        output_params=output_params, dtypes=dtypes)
