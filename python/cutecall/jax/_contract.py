"""A compiled specialization with its JAX call contract, callable without
the CuTe DSL: :class:`CompiledCall` (``cutecall.compile`` makes one,
``jax/_compile.py``).

A :class:`CompiledCall` is what a bundle stores for one kernel and what
``load_bundle`` gives back: the :class:`CompiledKernel` (object bytes, plan)
plus everything a JAX call needs that the object does not say -- input and
output dtypes and ranks, how output shapes follow from input shapes, XLA
layouts, aliases, the runtime scalars' names and types. Calling it binds the
``cutecall_call`` primitive directly: no CuTe DSL import, no compile.

Also here: :func:`register` (cutecall's XLA FFI targets, for processes that
only deserialize) and :func:`jax_export_checks` (the ``disabled_checks`` that
``jax.export`` needs for cutecall's custom calls).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from . import _targets
from ._batching import BatchPlan
from .._driver import scalars as _scalars
from .._driver.plan import decode_plan
from .._driver.call_record import CallRecord, JaxContract

__all__ = ["CompiledCall", "JaxContract", "register",
           "jax_export_checks"]


@dataclasses.dataclass(frozen=True)
class CompiledCall(CallRecord):
    """A compiled kernel callable from JAX without the CuTe DSL.

    Call it with the flat input arrays (pytree arguments flattened, ``None``
    arguments left out), then the runtime scalars positionally or by name::

        y = call(a, b)                      # shapes from the recorded contract
        y = call(a, b, output_shape_dtype=jax.ShapeDtypeStruct(...))
        y = call(x, bias, alpha=1.5)        # a runtime scalar by name

    Returns the single output, or a tuple of the flat outputs. Works eagerly
    and under ``jax.jit``/``jax.export`` (also with symbolic shapes).
    ``contract`` is None for kernels exported without one (C++/PyTorch only).
    """

    def __call__(self, *args, output_shape_dtype: Any = None, **scalars):
        c = self.contract
        if c is None:
            raise TypeError(
                f"cutecall: kernel '{self.name}' was exported without a JAX "
                "call contract (from a bare CompiledKernel); export the result "
                "of cutecall.compile(...) to call it from JAX")
        n = len(c.inputs)
        if len(args) < n:
            raise TypeError(f"cutecall: kernel '{self.name}' takes {n} input "
                            f"arrays, got {len(args)} positional arguments")
        arrays = [self._array(i, x) for i, x in enumerate(args[:n])]
        bits = self._scalar_bits(args[n:], scalars)
        shapes = self._output_shapes(arrays, output_shape_dtype)
        self._check_layouts([tuple(x.shape) for x in arrays], shapes)
        from ._primitive import cutecall_p  # the lowering registers with it
        _targets.ensure_registered()
        results = cutecall_p.bind(
            *arrays, kernel=self.kernel, scalars=bits,
            out_avals=tuple(jax.core.ShapedArray(s, np.dtype(dt))
                            for s, (dt, _) in zip(shapes, c.outputs)),
            aliases=c.aliases, allow_cuda_graph=c.allow_cuda_graph,
            in_layouts=c.in_layouts, out_layouts=c.out_layouts,
            batch=None if c.batch is None else BatchPlan(*c.batch))
        return results[0] if c.single_output else tuple(results)

    def _check_layouts(self, in_shapes, out_shapes) -> None:
        """Known extents against what the kernel was compiled for (static
        extents, divisibility classes): a clear error at trace time rather
        than at launch. Symbolic extents are checked by C++ at launch."""
        names = self.kernel.operand_names.split(",")
        for k, op in enumerate(decode_plan(self.kernel.plan)):
            side = "input" if op["source"] == 0 else "output"
            shape = (in_shapes if op["source"] == 0 else out_shapes)[op["index"]]
            what = f"{side} '{names[k]}'" if k < len(names) else f"{side} {k}"
            for d, extent in op["static"]:
                if isinstance(shape[d], int) and shape[d] != extent:
                    raise ValueError(
                        f"cutecall: kernel '{self.name}' {what} dim {d} is "
                        f"{shape[d]} but the kernel was compiled for {extent}")
            for d, div, _ in op["dynamic"]:
                if isinstance(shape[d], int) and shape[d] % div:
                    raise ValueError(
                        f"cutecall: kernel '{self.name}' {what} dim {d} = "
                        f"{shape[d]} is not divisible by {div}, the "
                        f"divisibility class it was compiled for; compile one "
                        f"for this class too, or with "
                        f"TensorSpec(divisibility=1) for every extent")

    def _array(self, i: int, x):
        dtype, rank = self.contract.inputs[i]
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"cutecall: input {i} of kernel '{self.name}' must "
                            f"be an array, got {type(x).__name__}: {x!r}")
        if np.dtype(x.dtype).name != dtype or len(x.shape) != rank:
            raise TypeError(f"cutecall: input {i} of kernel '{self.name}' is "
                            f"{np.dtype(x.dtype).name}{list(x.shape)}; the "
                            f"kernel was compiled for rank-{rank} {dtype}")
        if isinstance(x, (jax.Array, jax.core.Tracer)):
            return x
        return jax.numpy.asarray(x)

    def _scalar_bits(self, positional, by_name) -> tuple:
        names = [nm for nm, _ in self.scalars]
        if len(positional) > len(names):
            raise TypeError(f"cutecall: kernel '{self.name}' takes "
                            f"{len(names)} runtime scalar(s) "
                            f"({', '.join(names) or 'none'}), got "
                            f"{len(positional)} positional")
        values = dict(zip(names, positional))
        for k, v in by_name.items():
            if k not in names:
                raise TypeError(f"cutecall: kernel '{self.name}' has no runtime "
                                f"scalar {k!r}; its scalars are "
                                f"{', '.join(names) or '(none)'}")
            if k in values:
                raise TypeError(f"cutecall: runtime scalar {k!r} of kernel "
                                f"'{self.name}' given twice")
            values[k] = v
        bits = []
        for nm, st in self.scalars:
            if nm not in values:
                raise TypeError(f"cutecall: kernel '{self.name}' needs runtime "
                                f"scalar {nm!r} ({st})")
            v = _scalars.concrete_scalar(values[nm], f"runtime scalar {nm!r}")
            bits.append(_scalars.encode_scalar(nm, st, v).bits)
        return tuple(bits)

    def _output_shapes(self, arrays, given) -> list[tuple]:
        outs = self.contract.outputs
        if given is not None:
            if callable(given) and not isinstance(given, jax.ShapeDtypeStruct):
                given = given(*arrays)
            leaves = jax.tree.leaves(given)
            if len(leaves) != len(outs):
                raise ValueError(f"cutecall: output_shape_dtype of kernel "
                                 f"'{self.name}' has {len(leaves)} leaves, the "
                                 f"kernel has {len(outs)} outputs")
            for j, (o, (dt, _)) in enumerate(zip(leaves, outs)):
                if np.dtype(o.dtype).name != dt:
                    raise TypeError(f"cutecall: output {j} of kernel "
                                    f"'{self.name}' is {dt}, output_shape_dtype "
                                    f"says {np.dtype(o.dtype).name}")
            return [tuple(o.shape) for o in leaves]
        shapes = []
        for j, (_, rule) in enumerate(outs):
            if rule is None:
                raise TypeError(
                    f"cutecall: kernel '{self.name}' records no shape for "
                    f"output {j} (it is not made of input dims and constants); "
                    "pass output_shape_dtype=")
            shapes.append(tuple(d if isinstance(d, int) else
                                arrays[d[0]].shape[d[1]] for d in rule))
        return shapes


def batch_tuple(plan: BatchPlan | None) -> tuple | None:
    """A BatchPlan as JaxContract keeps it."""
    if plan is None:
        return None
    return (tuple(plan.inputs), tuple(plan.outputs), plan.reason, plan.explicit_loop)


def register() -> None:
    """Registers cutecall's XLA FFI targets with JAX (idempotent).

    ``cutlass_call`` and ``load_bundle`` do it themselves; a process that only
    deserializes a ``jax.export`` artifact calls it first::

        import cutecall; cutecall.register()
        exp = jax.export.deserialize(blob); exp.call(x)

    It registers even after ``disable_automatic_ffi_registration()``.
    """
    _targets.ensure_registered(explicit=True)


def jax_export_checks() -> list:
    """The ``disabled_checks`` that ``jax.export.export`` needs for functions
    calling cutecall kernels::

        jax.export.export(jax.jit(f), disabled_checks=cutecall.jax_export_checks())

    jax.export refuses custom calls it does not know to be stable. cutecall's
    targets are versioned (``cutecall_call_v1``): their ABI does not change
    under that name, and each call carries its own object and plan.
    """
    check = jax.export.DisabledSafetyCheck.custom_call
    return [check(_targets.TARGET), check(_targets.TARGET_NO_GRAPH)]
