"""``cutecall.torch.kernel(build, recipe=...)``: a launch object found by
what the caller asked for. A call whose recipe key (``_driver.recipe``) a
store or pack knows launches the recorded kernel through the same C++
launch object as :class:`~cutecall.torch.Kernel`, with neither ``build``
(nor the kernel's library) nor the CuTe DSL imported; a miss builds the
launcher, takes :class:`Kernel`'s full path, and records what it compiled
(``_recipe_find``: how a call is described, keyed and matched).
"""

from __future__ import annotations

import inspect
import threading
import types
import weakref
from typing import Callable

import torch

from .. import _core
from .._driver import pytree, recipe as _recipe
from .._driver.call_leaves import entry_of, register_types
from .._driver.compiled import CompiledKernel
from .._driver.log import logger
from . import _describe
from ._custom_op import custom_op
from ._kernel import Kernel, _is_compiling
from ._recipe_find import TorchRecipe, call_desc, contract_of, describe, merge


def _is_build(fn) -> bool:
    """Whether `fn` is a zero-argument function returning the launcher
    (else it is the launcher)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return not any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                   for p in params)


def _uses(contract) -> list:
    """The ``_core.ArgUse`` per leaf a torch contract records."""
    out = []
    for kind, index, st, value in contract.uses:
        k = getattr(_core.UseKind, kind)
        if kind == "CONST":
            out.append(_core.ArgUse(k, value=value))
        elif kind == "SCALAR":
            out.append(_core.ArgUse(k, index, getattr(_core.ScalarType, st)))
        else:
            out.append(_core.ArgUse(k, index))
    return out


class RecipeKernel:
    """A launch object of ``cutecall.torch.kernel(build, recipe=...)``:
    called as :class:`Kernel` is (its outputs, ``allocate``, ``compile``,
    ``torch.compile``), keyed by the recipe. ``k.fn`` is None until a miss
    builds the launcher; ``k.full`` is the :class:`Kernel` a miss uses."""

    def __init__(self, build: Callable, *, recipe, packages=(), allocate=None,
                 name: str | None = None, compile_options: str | None = None, **options):
        if allocate is not None and not callable(allocate):
            raise TypeError(f"cutecall: allocate must be a callable returning the "
                            f"output tensors, got {allocate!r}")
        self._build, self.fn, self._full = build, None, None
        self.name = name or getattr(build, "__name__", "kernel")
        self.allocate = allocate
        self._options = dict(options, name=self.name, compile_options=compile_options)
        site = dict(options, compile_options=compile_options, allocate=allocate is not None)
        self.recipe = TorchRecipe(recipe, name=self.name, packages=packages,
                                  compile_options=compile_options,
                                  site=_recipe.site_fingerprint(site, "cutecall.torch.kernel options"))
        self.launch = _core.TensorLauncher(self.name, [], self._on_miss)
        self._contract = None      # a TorchContract met: parameters, outputs
        self._positions: dict = {}  # (args, outputs) -> where allocate's outputs go
        self._local = threading.local()
        self._ops: dict = {}
        this = weakref.ref(self)

        def placed_call(*args):
            return this()._placed_op(args)
        self._placed_call = torch.compiler.allow_in_graph(placed_call)

    def __repr__(self):
        return f"cutecall.torch.RecipeKernel({self.name}, {len(self.launch)} specialization(s))"

    @property
    def full(self) -> Kernel:
        """The :class:`Kernel` of the built launcher (a miss builds it)."""
        if self._full is None:
            fn = self._build() if _is_build(self._build) else self._build
            if not callable(fn):
                raise TypeError(f"cutecall: the launcher function of '{self.name}' "
                                f"(recipe=) must return a @cute.jit launcher, got "
                                f"{type(fn).__name__}: {fn!r}")
            self.fn = fn
            self._full = Kernel(fn, allocate=self.allocate, **self._options)
        return self._full

    # -- what torch.compile's op needs (custom_op) ----------------------------

    @property
    def params(self) -> list:
        if self._contract is None:
            return self.full.params
        return [types.SimpleNamespace(name=n, kind=k, scalar_type=t)
                for n, k, t in self._contract.params]

    @property
    def output_params(self) -> list[str]:
        return list(self._contract.outputs) if self._contract is not None \
            else self.full.output_params

    @property
    def num_outputs(self) -> int:
        return len(self.output_params)

    # -- calls -----------------------------------------------------------------

    def __call__(self, *args):
        if not _recipe.enabled():
            return self.full(*args)
        if _is_compiling():  # AOTAutograd traces the op inside (fake tensors)
            return self._placed_call(*args)
        if self.allocate is None:
            return self.launch(*args)
        return self._allocate_and_launch(args)

    def _placed_op(self, args):
        """Under ``torch.compile``, on fake tensors: the op of the recorded
        contract (found by key: no launcher built), else the full path's."""
        if self._contract is None:
            outs = self._outputs_of(args) if self.allocate is not None else ()
            target = self.recipe.target(self._arch(args))
            variants = self.recipe.candidates(
                self.recipe.key_of(call_desc(args, outs), target), target.arch)
            if not variants:
                return self.full._placed_op(args)
            self._contract = variants[0][0].torch
        if "op" not in self._ops:
            self._ops["op"] = custom_op(self)
        return self._ops["op"](*args)

    def _outputs_of(self, args) -> tuple:
        outs = self.allocate(*args)
        return (outs,) if isinstance(outs, torch.Tensor) else tuple(outs)

    def _allocate_and_launch(self, args):
        outs = self.allocate(*args)
        single = isinstance(outs, torch.Tensor)
        outs = (outs,) if single else tuple(outs)
        merged = merge(args, outs, self._positions_of(args, outs))
        self._local.call = (tuple(args), outs)
        try:
            self.launch(*merged)
        finally:
            self._local.call = None
        return outs[0] if single else outs

    def _positions_of(self, args, outs) -> tuple:
        """Where `outs` go in the launcher-order call: a recorded variant's
        positions, else the built launcher's outputs."""
        shape = (len(args), len(outs))
        if self._contract is not None and len(outs) != len(self._contract.outputs):
            raise ValueError(f"cutecall: allocate of '{self.name}' returned "
                             f"{len(outs)} tensors, expected {len(self._contract.outputs)}")
        if shape not in self._positions:
            _, variant, _, _ = self.recipe.find(args, outs, self._arch((*args, *outs)))
            if variant is not None:
                self._contract = variant.torch
                self._positions[shape] = variant.torch.out_positions
            else:
                self._positions[shape] = self._full_positions(args, outs)
        expected = len(self._positions[shape])
        if len(outs) != expected:
            raise ValueError(f"cutecall: allocate of '{self.name}' returned "
                             f"{len(outs)} tensors, expected {expected}")
        return self._positions[shape]

    def _full_positions(self, args, outs) -> tuple:
        full = self.full
        if len(outs) != full.num_outputs:
            raise ValueError(f"cutecall: allocate of '{self.name}' returned "
                             f"{len(outs)} tensors, expected {full.num_outputs}")
        if not full.first_call.outputs_known:
            full.first_call.place(full.first_call.merge(args, outs))
        merged = full.first_call.merge(args, outs)
        return tuple(i for i, x in enumerate(merged) if any(x is o for o in outs))

    @staticmethod
    def _arch(args) -> str | None:
        """The arch of the first CUDA tensor's device, else None."""
        for x in describe(args)[1]:
            if isinstance(x, torch.Tensor) and x.device.type == "cuda":
                return _describe.device_arch(x.device)
        return None

    # -- the C++ launch object's miss ----------------------------------------

    def _on_miss(self, args, props):
        user, outs = getattr(self._local, "call", None) or (tuple(args), ())
        register_types(self.launch, args, _describe.is_tensor)
        key = variant = None
        if _recipe.enabled():  # (k.launch called directly: the C++ launcher)
            key, variant, kernel, target = self.recipe.find(user, outs, self._arch(args))
        if variant is not None and self._on_one_device(args):
            self._contract = variant.torch
            return entry_of(kernel, _uses(variant.torch), variant.torch.masks)
        full = self.full
        _describe.check_kinds(full, args, (torch.Tensor,))
        if not any(isinstance(a, torch.Tensor) or pytree.is_container(a) for a in args):
            raise ValueError(f"cutecall: '{self.name}' was called without a "
                             "tensor; a launch runs on its tensors' device")
        compiled, entry = full.first_call.specialization(args, props)
        if key is not None:
            self._record(key, target, compiled, entry, args, outs)
        return entry

    @staticmethod
    def _on_one_device(args) -> bool:
        """Whether every tensor is on one CUDA device (else the full path
        names the one that is not)."""
        devices = {x.device for x in describe(args)[1] if isinstance(x, torch.Tensor)}
        return len(devices) == 1 and next(iter(devices)).type == "cuda"

    def _record(self, key, target, compiled, entry, args, outs) -> None:
        full = self.full
        positions = tuple(i for i, x in enumerate(args) if any(x is o for o in outs))
        contract = contract_of(entry, full.params, full.output_params, positions,
                               describe(args)[1])
        if contract is None:
            logger.info("kernel '%s': a call with compile-time values that are not "
                        "JSON is not recorded under its recipe", self.name)
            return
        self._contract = contract
        self.recipe.record(key, target.arch, compiled, contract)

    def compile(self, *args, arch: str | None = None) -> CompiledKernel:
        """The kernel a call with these arguments launches (without the
        outputs when ``allocate`` is set), found under its recipe (nothing
        built, no DSL) or compiled and recorded, without launching; as
        :meth:`Kernel.compile` (meta tensors, :class:`TensorDesc`)."""
        outs = self._outputs_of(args) if self.allocate is not None else ()
        if _recipe.enabled():
            key, variant, kernel, target = self.recipe.find(args, outs, arch)
            if variant is not None:
                self._contract = variant.torch
                return kernel
        full = self.full
        if outs and not full.first_call.outputs_known:
            full.first_call.place(full.first_call.merge(args, outs))
        merged = tuple(full.first_call.merge(args, outs)) if outs else tuple(args)
        _describe.check_kinds(full, merged, (torch.Tensor, _describe.TensorDesc))
        compiled, entry = full.first_call.specialization(merged, (), launch=False, arch=arch)
        if _recipe.enabled():
            self._record(key, target, compiled, entry, merged, outs)
        return compiled
