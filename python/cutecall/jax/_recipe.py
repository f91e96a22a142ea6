"""The JAX front's warm path for ``cutlass_call(..., recipe=...)``: a call
found under its recipe key (``_driver.recipe``) binds the stored kernel
directly, with neither the launcher (nor its library) nor the CuTe DSL.

:class:`RecipeCalls` belongs to one ``CutlassCall``. ``find`` describes a
call (its arrays' dtypes and ranks, scalars, None and compile-time values,
in the order the binding meets them), computes the recipe key, and returns
the flat input arrays, scalar bits and the :class:`~cutecall._driver.recipe.
Variant` whose kernel fits the call's extents, or None (a miss: the call
takes the full path, and ``record`` adds what it compiled).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any

import jax
import numpy as np

from .._driver import packs, pytree, recipe as _recipe, signature as _signature
from .._driver import target as _target
from .._driver.fingerprint import fingerprint
from .._driver.log import logger
from .._driver.call_record import JaxContract
from .._driver.pipeline import Launcher
from . import _args, _call_checks
from ._call import CutlassCall, TracedCall
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
        elif _signature.is_scalar_value(a) or pytree.dsl_scalar_type(a):
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
        self._lock = threading.Lock()
        # recipe key -> [(variant, kernel or None)], for one store generation
        self._variants: dict[str, list] = {}
        self._generation = -1
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
        for variant, kernel in self._candidates(key):
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

    def _candidates(self, key: str) -> list:
        """(Variant, kernel or None: load it) pairs under recipe `key`: the
        stores' record, else the packs' entries (kernels included)."""
        from .._driver.store import memory
        with self._lock:
            if self._generation != memory.generation():  # cutecall.clear_cache()
                self._variants, self._generation = {}, memory.generation()
            found = self._variants.get(key)
        if found is None:
            found = [(v, None) for v in _recipe.load(key, self.target.arch)
                     if v.contract is not None]
            if not found:
                found = [(_recipe.Variant(r.kernel.key, r.kernel.name, r.scalars, r.contract),
                          r.kernel) for r in packs.find(key) if r.contract is not None
                         and r.kernel.arch == self.target.arch]
            with self._lock:
                self._variants[key] = found
        return found

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
        with self._lock:
            self._variants.pop(key, None)


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




# ---------------------------------------------------------------------------
# The call site

def _abstract(x):
    """An array as its shape and dtype (a tracer too); anything else as is."""
    return jax.ShapeDtypeStruct(x.shape, x.dtype) if _args.is_array(x) else x


def _content(value):
    """Options as hashable content (mappings as sorted item tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _content(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_content(v) for v in value)
    return value


class RecipeCall(CutlassCall):
    """A ``cutlass_call(build, recipe=..., ...)``: a kernel found by what the
    caller asked for. ``build()`` returns the launcher (importing its
    library, building the kernel object); it runs only on a miss. A process
    whose store (local or remote) holds the kernel imports neither the
    launcher's library nor the CuTe DSL, nor torch::

        def build():
            from mylib.rmsnorm import RMSNorm          # imported on a miss only
            return RMSNorm(cutlass.BFloat16, 4096)
        rmsnorm = cutecall.cutlass_call(
            build, recipe=("rmsnorm", "bfloat16", 4096),
            recipe_packages=("mylib",), name="rmsnorm",
            output_shape_dtype=lambda x, w: x)
        y = rmsnorm(x, w)

    The recipe values, with the call's dtypes, ranks, scalars and None
    arguments, the call site's options, the target and the installed files
    of cutecall, the DSL and `recipe_packages`, key a record of the kernels
    the recipe led to (``_driver.recipe``); a call whose extents fit one of
    them binds it directly. A miss runs the full ``cutlass_call`` path and
    records what it compiled. The values must determine the kernel object:
    two recipes that build different kernels need different values.
    """

    launcher_now = False

    def __init__(self, build, *, recipe, packages=(), **options):
        super().__init__(build, **options)
        self._build, self.fn = build, None
        o = self._launcher_options
        self._served = jax.jit(self._serve, static_argnums=(1, 2, 3, 4))
        self.recipe = RecipeCalls(
            recipe, name=self.name, packages=tuple(packages),
            compile_options=o["compile_options"], arch=self.arch,
            site=fingerprint(_content({k: v for k, v in options.items()
                                       if k != "output_shape_dtype"}),
                             "cutlass_call options"))

    @functools.cached_property
    def launcher(self) -> Launcher:
        if self.fn is None:
            fn = self._build()
            if not callable(fn):
                raise TypeError(f"cutecall: the launcher function of '{self.name}' "
                                f"(recipe=) must return a @cute.jit launcher, got "
                                f"{type(fn).__name__}: {fn!r}")
            self.fn = fn
        return Launcher(self.fn, name=self.name, **self._launcher_options)

    def __call__(self, *args, **kwargs):
        found, (ret_tree, structs) = self._lookup(args, kwargs)
        if found is None and _recipe.enabled():
            # A miss: the full path traced on its own (compiling or loading,
            # and recorded), then served as every later call is, so a site's
            # calls share one jitted function in the program.
            abstract = jax.tree.map(_abstract, args, is_leaf=_args.is_array)
            self.recipe.recording(args, kwargs, structs,
                                  lambda: CutlassCall.trace(self, *abstract, **kwargs))
            found, _ = self._lookup(args, kwargs)
        if found is None:  # nothing recorded (CUTECALL_RECIPES=0, scalars it cannot follow)
            return CutlassCall.__call__(self, *args, **kwargs)
        return self._served(found.arrays, found.call, found.scalars, ret_tree,
                            tuple(structs))

    def trace(self, *args, **kwargs):
        found, (ret_tree, structs) = self._lookup(args, kwargs)
        if found is not None:
            traced = self._served.trace(found.arrays, found.call, found.scalars, ret_tree,
                                        tuple(structs))
            return TracedCall(traced, found.call.scalars)
        return self.recipe.recording(
            args, kwargs, structs, lambda: CutlassCall.trace(self, *args, **kwargs))

    @staticmethod
    def _serve(arrays, call, scalars, ret_tree, structs):
        return jax.tree.unflatten(ret_tree, call(*arrays, *scalars,
                                                 output_shape_dtype=list(structs)))

    def _lookup(self, args, kwargs):
        """(the call's Found, or None: a miss; (output tree, output structs))."""
        for i, x in enumerate(args):  # the rest is checked where no record serves
            _call_checks.refuse_torch_tensor(x, f"argument {i} of '{self.name}'")
        try:
            ret_tree, structs, _, _ = self._outputs(args)
        except Exception as e:  # the arguments may be what is wrong
            _call_checks.raise_if_unfit(self, args, kwargs, e)
            raise
        return self.recipe.find(args, kwargs, structs), (ret_tree, structs)
