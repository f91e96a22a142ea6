"""``cutecall.cutlass_call``: the JAX front of cutecall."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import jax

from . import _compile, _runtime, _spec
from ._primitive import cutecall_p

__all__ = ["cutlass_call", "CutlassCall"]


def _launcher_param_names(fn) -> list[str]:
    """Positional parameter names after the stream, for error messages."""
    try:
        sig = inspect.signature(inspect.unwrap(getattr(fn, "__wrapped__", fn)))
    except (TypeError, ValueError):
        return []
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[1:]


def _per_leaf(spec, n: int, what: str) -> list:
    if spec is None or isinstance(spec, _spec.TensorSpec):
        return [spec] * n
    spec = list(spec)
    if len(spec) != n:
        raise ValueError(f"cutecall: {what} has {len(spec)} entries for {n} "
                         f"arrays: {spec!r}")
    return spec


class CutlassCall:
    """A CuTe DSL launcher bound to an output contract; call it with arrays.

    Created by :func:`cutlass_call`. Calling it traces once per input
    shape/dtype signature (``jax.jit`` semantics) and compiles once per
    specialization: dynamic dims are runtime values, so new shapes reuse the
    compiled kernel.
    """

    def __init__(self, fn, output_shape_dtype, input_spec, output_spec,
                 input_output_aliases, allow_cuda_graph, compile_options,
                 name, constexprs):
        if not callable(fn):
            raise TypeError(f"cutecall: fn must be a @cute.jit launcher, got "
                            f"{type(fn).__name__}: {fn!r}")
        self.fn = fn
        self.output_shape_dtype = output_shape_dtype
        self.input_spec = input_spec
        self.output_spec = output_spec
        self.aliases = self._check_aliases(input_output_aliases)
        self.allow_cuda_graph = bool(allow_cuda_graph)
        self.options, self.arch = _compile.resolve_options(compile_options)
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.constexprs = tuple(sorted(constexprs.items()))
        for k, v in self.constexprs:  # fail early on unusable constexprs
            _spec.fingerprint(v, f"constexpr {k!r}")
        self._param_names = _launcher_param_names(fn)
        _runtime.ensure_registered()
        self._jitted = jax.jit(self._trace)

    @staticmethod
    def _check_aliases(aliases) -> tuple:
        if aliases is None:
            return ()
        if not isinstance(aliases, Mapping):
            raise TypeError("cutecall: input_output_aliases must be a dict "
                            f"{{input index: output index}}, got {aliases!r}")
        out = []
        for i, o in aliases.items():
            if not isinstance(i, int) or not isinstance(o, int) or i < 0 or o < 0:
                raise TypeError("cutecall: input_output_aliases entries must be "
                                f"non-negative ints, got {i!r}: {o!r}")
            out.append((i, o))
        if len({o for _, o in out}) != len(out):
            raise ValueError("cutecall: input_output_aliases maps two inputs "
                             f"to one output: {aliases!r}")
        return tuple(sorted(out))

    def _check_inputs(self, args):
        for i, x in enumerate(jax.tree.leaves(args)):
            if not hasattr(x, "shape") or not hasattr(x, "dtype"):
                raise TypeError(f"cutecall: input {i} of '{self.name}' must be "
                                f"an array, got {type(x).__name__}: {x!r}")

    def __call__(self, *args):
        try:
            return self._jitted(*args)
        except TypeError:
            self._check_inputs(args)  # a clearer error, if an input is bad
            raise

    def _trace(self, *args):
        # Leaves are tracers here: __call__ and lower() vet the inputs.
        flat_in, in_tree = jax.tree.flatten(args)
        outs = self.output_shape_dtype
        if callable(outs) and not isinstance(outs, jax.ShapeDtypeStruct):
            outs = outs(*args)
        flat_out, ret_tree = jax.tree.flatten(outs)
        for j, o in enumerate(flat_out):
            if not isinstance(o, jax.ShapeDtypeStruct):
                raise TypeError(f"cutecall: output_shape_dtype leaf {j} of "
                                f"'{self.name}' must be a jax.ShapeDtypeStruct, "
                                f"got {type(o).__name__}: {o!r}")
        positional = tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)
        for i, o in self.aliases:
            if i >= len(flat_in) or o >= len(flat_out):
                raise ValueError(f"cutecall: input_output_aliases {{{i}: {o}}} is "
                                 f"out of range for {len(flat_in)} inputs and "
                                 f"{len(flat_out)} outputs")
            if (flat_in[i].shape, flat_in[i].dtype) != \
                    (flat_out[o].shape, flat_out[o].dtype):
                raise ValueError(f"cutecall: input {i} {flat_in[i].dtype}"
                                 f"{list(flat_in[i].shape)} cannot alias output "
                                 f"{o} {flat_out[o].dtype}{list(flat_out[o].shape)}")
        aliased_outs = {o for _, o in self.aliases}

        in_specs = _per_leaf(self.input_spec, len(flat_in), "input_spec")
        out_specs = _per_leaf(self.output_spec, len(flat_out), "output_spec")
        names = self._param_names
        operands = []
        for i, (x, s) in enumerate(zip(flat_in, in_specs)):
            nm = names[i] if i < len(names) and len(flat_in) == len(args) \
                else f"input{i}"
            operands.append(_spec.make_operand(nm, _spec.SOURCE_ARG, i,
                                               x.shape, x.dtype, s))
        kernel_outs = [j for j in range(len(flat_out)) if j not in aliased_outs]
        for j in kernel_outs:
            k = len(flat_in) + kernel_outs.index(j)
            nm = names[k] if k < len(names) else f"output{j}"
            operands.append(_spec.make_operand(
                nm, _spec.SOURCE_RET, j, flat_out[j].shape, flat_out[j].dtype,
                out_specs[j]))
        if self.aliases:
            if any(not isinstance(o, jax.ShapeDtypeStruct) for o in positional):
                raise ValueError("cutecall: input_output_aliases needs a flat "
                                 "tuple of outputs")
            out_tree = jax.tree.structure(tuple(flat_out[j] for j in kernel_outs))
        else:
            out_tree = jax.tree.structure(positional)

        key = _spec.specialization_key(
            self.fn, operands, str(in_tree), str(out_tree), self.constexprs,
            self.options, self.arch, _compile.versions())
        spec = _compile.KernelSpec(
            launcher=self.fn, constexprs=self.constexprs,
            operands=tuple(operands), num_inputs=len(flat_in),
            num_args=len(flat_in), num_rets=len(flat_out), input_tree=in_tree,
            output_tree=out_tree, key=key)
        kernel = _compile.get_or_compile(spec, self.name, self.options, self.arch)

        in_layouts = tuple(_spec.xla_layout(op) for op in operands
                           if op.source == _spec.SOURCE_ARG)
        out_layout = {op.index: _spec.xla_layout(op) for op in operands
                      if op.source == _spec.SOURCE_RET}
        for i, o in self.aliases:
            out_layout[o] = in_layouts[i]
        out_layouts = tuple(out_layout[j] for j in range(len(flat_out)))
        results = cutecall_p.bind(
            *flat_in, kernel=kernel,
            out_avals=tuple(jax.core.ShapedArray(o.shape, o.dtype)
                            for o in flat_out),
            aliases=self.aliases, allow_cuda_graph=self.allow_cuda_graph,
            in_layouts=in_layouts, out_layouts=out_layouts)
        return jax.tree.unflatten(ret_tree, results)

    def lower(self, *args, platform: str = "cuda"):
        """Lowers a call for `platform` (no GPU needed): ``.as_text()`` shows
        the custom call."""
        self._check_inputs(args)
        return self._jitted.trace(*args).lower(lowering_platforms=(platform,))


def cutlass_call(fn: Callable, *, output_shape_dtype: Any,
                 input_spec: Any = None, output_spec: Any = None,
                 input_output_aliases: Mapping[int, int] | None = None,
                 allow_cuda_graph: bool = True,
                 compile_options: str | None = None,
                 name: str | None = None, **constexprs) -> CutlassCall:
    """Wraps a CuTe DSL launcher as a JAX-callable kernel.

    Example::

        import jax, jax.numpy as jnp, cutecall
        from cutecall.examples.kernels import vector_add

        add = cutecall.cutlass_call(
            vector_add,
            output_shape_dtype=jax.ShapeDtypeStruct((4096,), jnp.float32))
        c = add(a, b)               # eager
        c = jax.jit(add)(a, b)      # or inside any jitted program

    Args:
      fn: a ``@cute.jit`` launcher ``fn(stream, *inputs, *outputs,
        **constexprs)``. It launches its kernels on ``stream`` (XLA's).
        Inputs and outputs arrive as ``cute.Tensor`` views of row-major
        device memory (lists/tuples of arrays arrive as lists/tuples).
      output_shape_dtype: a ``jax.ShapeDtypeStruct`` or a pytree of them;
        or a function of the input arrays returning one (handy when output
        shapes follow input shapes).
      input_spec, output_spec: a :class:`TensorSpec` for all arrays, or one
        per flattened array: static dims, divisibility, layout, mode,
        alignment. Default: every dim is a runtime value, row-major, 16-byte
        aligned pointers.
      input_output_aliases: ``{input index: output index}`` over flattened
        arrays. The output reuses the input's buffer (donate the input to
        avoid a copy) and is not passed to ``fn``; the kernel writes
        through the input tensor.
      allow_cuda_graph: when False, XLA never captures this call in a CUDA
        graph (command buffer).
      compile_options: a ``cute.compile`` options string; ``--gpu-arch`` picks
        the target (default: $CUTECALL_ARCH, the visible GPU, else sm_90a).
      name: the kernel name used in errors and the HLO (default: fn's name).
      **constexprs: compile-time keyword arguments passed to ``fn``; part of
        the specialization key, so they must be hashable Python values.

    Returns:
      A :class:`CutlassCall`; call it with the input arrays (or pytrees).
      Repeated calls reuse one trace per signature and one compile per
      specialization.
    """
    return CutlassCall(fn, output_shape_dtype, input_spec, output_spec,
                       input_output_aliases, allow_cuda_graph, compile_options,
                       name, constexprs)
