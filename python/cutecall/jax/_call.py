"""``CutlassCall``: a CuTe DSL launcher bound to a JAX call contract (made by
``cutecall.cutlass_call``, ``jax/_api.py``)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import jax

from .._driver import pytree, scalars as _scalars, signature as _signature, target as _target
from .._driver.binding_builder import check_arguments
from .._driver.operand import SOURCE_ARG, SOURCE_RET
from .._driver.pipeline import Launcher
from . import _aliases, _args as _jax_args, _batching, _call_checks, _targets
from ._primitive import cutecall_p
from ._varying import match_varying

__all__ = ["CutlassCall", "TracedCall"]

# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TracedCall:
    """One call of a :class:`CutlassCall`, traced (``CutlassCall.trace``).

    ``traced`` is JAX's ``jax.stages.Traced`` (``.jaxpr``, ``.out_info``);
    ``scalars`` the call's runtime scalars, ``(name, CuTe DSL type)`` each,
    in the order the kernel takes them."""

    traced: Any
    scalars: tuple

    @property
    def jaxpr(self):
        return self.traced.jaxpr

    def lower(self, platform: str = "cuda"):
        """The call lowered for `platform` (no GPU needed)."""
        return self.traced.lower(lowering_platforms=(platform,))


class CutlassCall:
    """A CuTe DSL launcher bound to an output contract; call it with arrays.

    Created by :func:`cutlass_call`. Calling it traces once per input
    shape/dtype signature and runtime-scalar value (``jax.jit`` semantics)
    and compiles once per specialization: dynamic dims and runtime scalars
    are runtime values, so new shapes and values reuse the compiled kernel.
    """

    def __init__(self, fn, *, output_shape_dtype, input_spec=None,
                 output_spec=None, input_output_aliases=None,
                 allow_cuda_graph=True, compile_options=None, compile_key=None,
                 use_static_tensors=False, operand_order="inputs_first",
                 name=None, constexprs=None, batch_modes=None,
                 static_fallback=None, output_params=None, dtypes=None):
        """Options as :func:`cutlass_call` takes them (keyword-only), with
        the launcher's constexprs as one mapping, `constexprs`."""
        if not callable(fn):
            raise TypeError(f"cutecall: fn must be a @cute.jit launcher, got "
                            f"{type(fn).__name__}: {fn!r}")
        if output_shape_dtype is None:
            raise ValueError("cutecall: output_shape_dtype must be specified")
        if operand_order not in _signature.ORDERS:
            raise ValueError(f"cutecall: operand_order must be one of "
                             f"{_signature.ORDERS}, got {operand_order!r}")
        output_params = _jax_args.check_output_params(output_params)
        self._launcher_options = dict(
            constexprs=dict(constexprs or {}), compile_options=compile_options,
            compile_key=compile_key, static_fallback=static_fallback,
            hint=_jax_args.explicit_static, dtypes=dtypes)
        self.fn, self.name = fn, name or getattr(fn, "__name__", type(fn).__name__)
        if type(self).launcher_now:
            self.name = self.launcher.name
        self.output_shape_dtype = output_shape_dtype
        self.input_spec = input_spec
        self.output_spec = output_spec
        self.aliases = _aliases.check_aliases(input_output_aliases)
        # Top-level outputs aliased whole: not passed to the launcher (unless
        # output_params names one parameter per output: see _unpassed).
        self.whole_outputs = frozenset(o for _, o in self.aliases
                                       if isinstance(o, int))
        self.allow_cuda_graph = bool(allow_cuda_graph)
        # The target, fixed when the call site is made (as NVIDIA's is).
        self.arch = _target.resolve_options(compile_options)[1]
        self.use_static_tensors = bool(use_static_tensors)
        self.output_params = output_params
        self.operand_order = operand_order
        self.batch_modes = _batching.check_batch_modes(batch_modes)
        _targets.ensure_registered()
        self._jitted = jax.jit(self._trace, static_argnums=(1, 2))

    launcher_now, recipe = True, None  # a RecipeCall: later, and its record

    @functools.cached_property
    def launcher(self) -> Launcher:
        """The driver's :class:`Launcher` for ``fn``."""
        return Launcher(self.fn, name=self.name, **self._launcher_options)

    # -- call ---------------------------------------------------------------
    def _outputs(self, args):
        outs = self.output_shape_dtype
        if callable(outs) and not isinstance(outs, jax.ShapeDtypeStruct):
            try:
                outs = outs(*args)
            except TypeError as e:
                # Only now read its signature (off the per-call path): the
                # call's arguments do not fit it, or the error is its own.
                try:
                    inspect.signature(outs).bind(*args)
                except TypeError as unfit:
                    raise TypeError(
                        f"cutecall: '{self.name}' was called with {len(args)} positional "
                        f"arguments, but its output_shape_dtype function {outs!r} does "
                        f"not take them ({unfit}); it receives the call's positional "
                        f"arguments") from None
                except ValueError:  # no signature to read (a builtin)
                    pass
                raise
        leaves, tree = jax.tree.flatten(outs)
        structs = []
        for j, o in enumerate(leaves):
            if not (hasattr(o, "shape") and hasattr(o, "dtype")):
                raise TypeError(f"cutecall: output_shape_dtype leaf {j} of "
                                f"'{self.name}' must be a jax.ShapeDtypeStruct, "
                                f"got {type(o).__name__}: {o!r}")
            structs.append(jax.ShapeDtypeStruct(o.shape, o.dtype))
        top = len(outs) if isinstance(outs, (list, tuple)) else 1
        return tree, tuple(structs), top, self._unpassed(top)

    def _unpassed(self, top: int) -> frozenset:
        """The top-level outputs the launcher does not receive: those aliased
        whole to an input, which the kernel writes through. When
        ``output_params`` names a parameter for every output, aliased ones
        included, each reaches its parameter too -- the same buffer as the
        input it aliases (QuACK's symmetric GEMM writes D through ``mD`` and
        through ``epilogue_args.mAuxOut``, a transposed view of D)."""
        if self.output_params is not None and len(self.output_params) == top:
            return frozenset()
        return self.whole_outputs

    def _bind(self, args, kwargs):
        for i, x in enumerate(args):  # a torch tensor says how to make a JAX array
            _call_checks.refuse_torch_tensor(x, f"argument {i} of '{self.name}'")
        check_arguments(self.launcher.sig, args,  # before output_shape_dtype reads them
                        {k for k, _ in self.launcher.constexprs}, self.name,
                        _jax_args.is_array)
        try:
            outs = self._outputs(args)
        except Exception as e:  # the arguments may be what is wrong
            _call_checks.raise_if_unfit(self, args, kwargs, e)
            raise
        for i, o in self.aliases:
            if isinstance(i, int) and (i >= len(args) or args[i] is None or
                                       _scalars.is_scalar_value(args[i])):
                raise ValueError(f"cutecall: input_output_aliases input {i} of "
                                 f"'{self.name}' is not an array argument of "
                                 f"the call ({len(args)} arguments)")
            if isinstance(o, int) and o >= outs[2]:
                raise ValueError(f"cutecall: input_output_aliases output {o} of "
                                 f"'{self.name}' is out of range for "
                                 f"{outs[2]} outputs")
        if not outs[3]:  # as many values as the launcher has parameters for
            _call_checks.check_counts(self, args, kwargs, outs[2])
        try:
            return self._bind_with(args, kwargs, outs)
        except TypeError:
            if not outs[3] or self.output_params is not None:
                raise
            # An output aliased whole to an input may have a parameter of
            # its own too, which the call leaves empty (QuACK's symmetric
            # GEMM writes D through mD and through epilogue_args.mAuxOut):
            # pass every output; the first error when that fits neither.
            try:
                return self._bind_with(args, kwargs, outs[:3] + (frozenset(),))
            except TypeError:
                pass
            raise

    def _bind_with(self, args, kwargs, outs):
        """The driver's binding of a call whose outputs are `outs`, placed
        where the kernel writes them when output_params names none."""
        binding, values = self.launcher.bind(
            args, kwargs, num_outputs=outs[2] - len(outs[3]), order=self.operand_order,
            output_names=self.output_params, scalar_value=_jax_args.scalar_value,
            is_array=_jax_args.is_array,
            describe=lambda b, leaves: _jax_args.describe_call(self, leaves, b, outs)[0])
        return binding, tuple(values), outs

    def __call__(self, *args, **kwargs):
        binding, flat_in, outs = self._bind(args, kwargs)
        with _call_checks.eager_platform(self, binding, flat_in):  # CPU: refused
            return self._jitted(flat_in, binding, outs)

    def trace(self, *args, **kwargs) -> "TracedCall":
        """Traces one call (no GPU needed; the kernel is compiled or loaded,
        as on a first call): a :class:`TracedCall`. Arrays may be
        ``jax.ShapeDtypeStruct``s::

            t = call.trace(jax.ShapeDtypeStruct((1024,), jnp.float32), 2.0)
            t.jaxpr            # the one cutecall_call equation
            t.lower().as_text()
        """
        binding, flat_in, outs = self._bind(args, kwargs)
        return TracedCall(self._jitted.trace(flat_in, binding, outs),
                          tuple((s.name, s.scalar_type) for s in binding.scalars))

    def lower(self, *args, platform: str = "cuda", **kwargs):
        """Lowers a call for `platform` (no GPU needed): ``.as_text()`` shows
        the custom call. Arrays may be ``jax.ShapeDtypeStruct``s."""
        return self.trace(*args, **kwargs).lower(platform)

    # -- trace ----------------------------------------------------------------
    def _trace(self, flat_in, binding, outs):
        ret_tree, out_structs = outs[:2]
        flat_in = list(flat_in)
        described, pairs, in_paths, out_paths = _jax_args.describe_call(
            self, flat_in, binding, outs)
        _call_checks.refuse_off_gpu()  # an eager call on a CPU, before compiling
        result = self.launcher.specialize(
            described.operands, binding, device_arch=described.device_arch,
            output_tree=described.output_tree, num_args=described.num_args,
            num_rets=described.num_rets)
        spec = result.spec
        in_layouts = tuple(_jax_args.xla_layout(op) for op in spec.operands
                           if op.source == SOURCE_ARG)
        out_layout = {op.index: _jax_args.xla_layout(op) for op in spec.operands
                      if op.source == SOURCE_RET}
        for a, b in pairs:
            if b in out_layout and out_layout[b] != in_layouts[a]:
                raise ValueError(
                    f"cutecall: output {pytree.keystr(out_paths[b])} of '{self.name}' "
                    f"reaches its parameter with XLA layout {out_layout[b]} but "
                    f"aliases input {pytree.keystr(in_paths[a])} of layout "
                    f"{in_layouts[a]}; give both the same TensorSpec layout")
            out_layout[b] = in_layouts[a]
        batch = _batching.resolve(
            self.batch_modes, self.name, spec.operands,
            [x.shape for x in flat_in], [o.shape for o in out_structs], pairs)
        results = cutecall_p.bind(
            *match_varying(flat_in), kernel=result.kernel,
            scalars=tuple(s.bits for s in binding.scalars),
            out_avals=tuple(jax.core.ShapedArray(o.shape, o.dtype)
                            for o in out_structs),
            aliases=pairs, allow_cuda_graph=self.allow_cuda_graph,
            in_layouts=in_layouts,
            out_layouts=tuple(out_layout[b] for b in range(len(out_structs))),
            batch=batch)
        if self.recipe is not None:  # what a RecipeCall records of this call
            self.recipe.bound(result.kernel, binding.scalars, pairs, in_layouts,
                              tuple(out_layout[b] for b in range(len(out_structs))),
                              self.allow_cuda_graph, batch)
        return jax.tree.unflatten(ret_tree, results)
