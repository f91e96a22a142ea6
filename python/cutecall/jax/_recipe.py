"""The JAX front's warm path for ``cutlass_call(..., recipe=...)``:
:class:`RecipeCall`, a call site whose calls found under their recipe key
(``_driver.recipe``; the lookups and records are ``_recipe_find``'s) bind
the stored kernel directly, with neither the launcher (nor its library)
nor the CuTe DSL; a miss runs the full ``cutlass_call`` path once and
records what it compiled.
"""

from __future__ import annotations

import functools

import jax

from .._driver import recipe as _recipe
from .._driver.pipeline import Launcher
from . import _args, _call_checks
from ._call import CutlassCall, TracedCall
from ._recipe_find import RecipeCalls


def _abstract(x):
    """An array as its shape and dtype (a tracer too); anything else as is."""
    return jax.ShapeDtypeStruct(x.shape, x.dtype) if _args.is_array(x) else x


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
            site=_recipe.site_fingerprint({k: v for k, v in options.items()
                                           if k != "output_shape_dtype"},
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
