"""The JAX front's recipe lookups and records: a ``cutlass_call(...,
recipe=...)`` call described (its arrays' dtypes and ranks, scalars, None
and compile-time values, in the order the binding meets them), keyed
(``_driver.recipe.recipe_key``) and matched to a recorded variant whose
kernel fits the call's extents; after a miss's full path, what it compiled
recorded under that key.

:class:`RecipeCalls` belongs to one ``RecipeCall`` (``_recipe``). ``find``
returns the flat input arrays, scalar bits and the :class:`~cutecall._driver.
recipe.Variant` whose kernel fits the call, or None (a miss: the call takes
the full path, and ``record`` adds what it compiled). Imports neither the
CuTe DSL nor the kernel's library.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._driver import pytree, recipe as _recipe, scalars as _scalars
from .._driver import target as _target
from .._driver.fingerprint import fingerprint
from .._driver.log import logger
from .._driver.call_record import JaxContract
from . import _args
from ._contract import CompiledCall, batch_tuple


RECIPES_ENV = _recipe.RECIPES_ENV  # "0": no recipe lookups (the full path)


@dataclasses.dataclass(frozen=True)
class Found:
    """A call served from a recipe: the recorded kernel as a bundle's kernel
    is called (``CompiledCall``), and the call's flat input arrays and
    runtime scalar values."""

    call: CompiledCall
    arrays: tuple
    scalars: tuple


def describe_call(args, kwargs) -> tuple[list, list, list]:
    """(description, array leaves, scalar values) of a call, in the order
    ``binding.bind`` meets them: positional arguments in order (each a
    pytree), then keyword scalars in the given order."""
    desc, arrays, scalars = [], [], []

    def on_scalar(path, value, scalar_type):
        scalars.append(value)
        return len(scalars) - 1

    for a in args:
        if a is None:
            desc.append(None)
        elif _scalars.is_scalar_value(a) or pytree.dsl_scalar_type(a):
            desc.append(["scalar", pytree.dsl_scalar_type(a) or type(a).__name__])
            scalars.append(a.value if pytree.dsl_scalar_type(a) else a)
        else:
            node, found = pytree.flatten(a, _args.is_array, on_scalar)
            desc.append(_node(node, iter(v for _, v in found)))
            arrays.extend(v for _, v in found)
    for k, v in kwargs.items():
        desc.append(["kw", k, pytree.dsl_scalar_type(v) or type(v).__name__])
        scalars.append(v.value if pytree.dsl_scalar_type(v) else v)
    return desc, arrays, scalars


def _outputs(out_structs) -> list:
    return [["out", np.dtype(o.dtype).name, len(o.shape)] for o in out_structs]


def _node(node, arrays) -> Any:
    """A flattened argument as JSON: arrays by dtype and rank, scalars by
    type, compile-time values by content."""
    if isinstance(node, pytree.Node):
        return [node.kind, getattr(node.cls, "__qualname__", None), list(map(str, node.keys)),
                [_node(c, arrays) for c in node.children]]
    if node.kind == pytree.ARRAY:
        x = next(arrays)
        return ["array", np.dtype(x.dtype).name, len(x.shape)]
    if node.kind == pytree.SCALAR:
        return ["scalar", node.scalar_type]
    return ["const", fingerprint(node.value, "a compile-time value")]


class RecipeCalls:
    """The recipe side of one call site. `values`: the caller's recipe;
    `site`: the call site's options as a fingerprint; `packages`: the
    kernel's distributions."""

    def __init__(self, values, *, name: str, site: Any, packages: tuple,
                 compile_options: str | None, arch: str):
        fingerprint(values, "recipe")  # fail early on values without content
        self.values, self.name, self.site = values, name, site
        self.packages = tuple(packages)
        self._target_args = (compile_options, arch)
        self._variants = _recipe.VariantCache("jax")
        self._bound = None

    @property
    def target(self):
        """The call's target, read per call (``$CUTECALL_DEVICE`` may change)."""
        return _target.resolve(*self._target_args)

    def key_of(self, desc) -> str:
        return _recipe.recipe_key(self.values, name=self.name, call=[self.site, desc],
                                  target=self.target.key(), packages=self.packages)

    def find(self, args, kwargs, out_structs) -> Found | None:
        """The recorded kernel this call (with outputs `out_structs`) fits,
        from a store's record or a pack, or None (also with
        ``CUTECALL_RECIPES=0``: every call takes the full path)."""
        if not _recipe.enabled():
            return None
        desc, arrays, scalars = describe_call(args, kwargs)
        key = self.key_of(desc + _outputs(out_structs))
        shapes = ([tuple(x.shape) for x in arrays], [tuple(o.shape) for o in out_structs])
        for variant, kernel in self._variants.get(key, self.target.arch):
            c = variant.contract
            if len(c.inputs) != len(arrays) or len(variant.scalars) != len(scalars) \
                    or len(c.outputs) != len(out_structs):
                continue
            kernel = kernel or self._kernel(variant)
            if kernel is None or not fits(kernel, *shapes, c.in_layouts, c.out_layouts):
                continue
            if kernel.name != self.name:  # a kernel shared with another site
                kernel = dataclasses.replace(kernel, name=self.name)
            _recipe.used(key, self.target.arch, variant)
            return Found(CompiledCall(variant.name, kernel, variant.scalars, c),
                         tuple(arrays), tuple(scalars))
        return None

    def _kernel(self, v: _recipe.Variant):
        """The kernel of `v` from the process or a store (verified), or None."""
        from .._driver.store import memory
        return memory.load(v.key, v.name, self.target.arch)

    def bound(self, kernel, scalars, aliases, in_layouts, out_layouts,
              allow_cuda_graph, batch) -> None:
        """What a full-path trace bound (``CutlassCall._trace`` calls it)."""
        self._bound = (kernel, tuple((s.name, s.scalar_type) for s in scalars),
                       aliases, in_layouts, out_layouts, allow_cuda_graph, batch)

    def recording(self, args, kwargs, out_structs, run):
        """`run()` (the call's full path), then what its trace bound is
        recorded under the call's recipe key (a trace JAX had cached binds
        nothing new: already recorded)."""
        self._bound = None
        out = run()
        if self._bound is not None:
            self.record(args, kwargs, out_structs, *self._bound)
        return out

    def record(self, args, kwargs, out_structs, kernel, scalars, aliases,
               in_layouts, out_layouts, allow_cuda_graph, batch) -> None:
        """After a full-path call: what it compiled, under its recipe key."""
        desc, arrays, values = describe_call(args, kwargs)
        if len(values) != len(scalars):
            logger.info("kernel '%s': its runtime scalars do not follow the call's "
                        "order (%d in the call, %d bound); no recipe record",
                        self.name, len(values), len(scalars))
            return
        contract = JaxContract(
            inputs=tuple((np.dtype(x.dtype).name, len(x.shape)) for x in arrays),
            outputs=tuple((np.dtype(o.dtype).name, None) for o in out_structs),
            single_output=False, aliases=tuple(tuple(a) for a in aliases),
            in_layouts=tuple(in_layouts), out_layouts=tuple(out_layouts),
            allow_cuda_graph=bool(allow_cuda_graph), batch=batch_tuple(batch))
        key = self.key_of(desc + _outputs(out_structs))
        _recipe.add(key, self.target.arch, _recipe.Variant(kernel.key, kernel.name,
                                                           scalars, contract))
        self._variants.forget(key)


def fits(kernel, in_shapes, out_shapes, in_layouts, out_layouts) -> bool:
    """Whether the call's extents meet what `kernel` was compiled for
    (``_driver.recipe.fits``), its arrays dense under their XLA layouts."""
    return _recipe.fits(kernel, [(s, _strides(s, l)) for s, l in zip(in_shapes, in_layouts)],
                        [(s, _strides(s, l)) for s, l in zip(out_shapes, out_layouts)])


def _strides(shape, minor_to_major) -> list:
    """A dense array's strides (elements) under an XLA layout; None for a
    stride that depends on a symbolic extent."""
    strides, step = [None] * len(shape), 1
    for d in minor_to_major:
        strides[d] = step
        step = step * shape[d] if isinstance(step, int) and isinstance(shape[d], int) \
            else None
    return strides
