"""Helion's CuTe launcher, with cutecall's C++ launch path underneath.

``default_cute_launcher(cute_kernel, grid, *args, block=, cute_compile_options=)``
takes the arguments of ``helion.runtime.default_cute_launcher`` and raises
its errors: tensors become pointer + shape + stride, ``Constexpr`` kernel
parameters are baked into the specialization, other scalars are runtime
(bool → Boolean, int → Int64, float → Float32), the grid is three runtime
Int32 values. What differs, on purpose: one compile serves every tensor
address, shape and stride (Helion's launch cache keys on data pointers and
bakes shapes), the stream is read per launch in C++ (never cached), and the
CUDA arch is passed to the compiler instead of written to ``CUTE_DSL_ARCH``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from .. import _core
from .._driver import dtypes, signature as _signature
from .._driver.fingerprint import IdentityKey
from .._driver.launch_object import BoundCall, LaunchObject
from .._driver.pipeline import Launcher
from . import _describe

_GRID = 3  # the launcher's first three arguments: grid x, y, z


class BackendUnsupported(RuntimeError):
    """Helion's ``exc.BackendUnsupported``: "Backend 'cute' does not support: …"."""

    def __init__(self, backend: str, detail: str) -> None:
        super().__init__(f"Backend '{backend}' does not support: {detail}")
        self.backend = backend
        self.detail = detail


def default_cute_launcher(cute_kernel: object, grid: tuple[int, ...], *args: object,
                          **kwargs: object) -> None:
    """Launches the ``@cute.kernel`` ``cute_kernel`` on ``grid`` (1 to 3 dims)
    with ``block`` (default ``(256, 1, 1)``) on the current CUDA stream of
    the tensors' device. A grid with a zero dim launches nothing and returns
    None. The kernel's ``_helion_cute_cluster_shape`` (or
    ``_cutecall_cluster_shape``) attribute, when set, makes it a cluster
    launch. ``cute_compile_options`` is passed to ``cute.compile``.

    A kernel whose generated code attached wrapper plans
    (``_helion_cute_wrapper_plans``: Helion 1.5's TMA, grouped and
    recurrence host code, which cutecall does not implement) is launched by
    Helion's own launcher, found by name (:func:`helions_launcher`).

    Raises ValueError for bad ``cute_compile_options``, ``block`` or
    ``grid``; BackendUnsupported for other keywords, non-CUDA or rank-0
    tensors, unsupported dtypes and scalar types.
    """
    if getattr(cute_kernel, "_helion_cute_wrapper_plans", None):
        return helions_launcher(cute_kernel)(cute_kernel, grid, *args, **kwargs)
    block = kwargs.pop("block", (256, 1, 1))
    options = kwargs.pop("cute_compile_options", None)
    if options is not None and not isinstance(options, str):
        raise ValueError(f"Invalid CuTe compile options: {options!r}")
    if not isinstance(block, tuple) or len(block) < 1:
        raise ValueError(f"Invalid block specification: {block}")
    if not isinstance(grid, tuple) or len(grid) < 1:
        raise ValueError(f"Invalid grid specification: {grid}")
    if kwargs:
        raise BackendUnsupported("cute", f"launcher kwargs: {sorted(kwargs)}")
    gx = int(grid[0])
    gy = int(grid[1]) if len(grid) > 1 else 1
    gz = int(grid[2]) if len(grid) > 2 else 1
    if gx <= 0 or gy <= 0 or gz <= 0:
        return None
    block_xyz = (int(block[0]), int(block[1]) if len(block) > 1 else 1,
                 int(block[2]) if len(block) > 2 else 1)
    _launcher(cute_kernel, block_xyz, options)(gx, gy, gz, *args)
    return None


def helions_launcher(cute_kernel):
    """Helion's own ``default_cute_launcher``, by name
    (``helion.runtime.cute.launcher`` in 1.5, ``helion.runtime`` before),
    for kernels with wrapper plans. BackendUnsupported naming the plans
    when Helion is not importable, or when that name is cutecall's own."""
    kinds = [p.get("kind") if isinstance(p, dict) else type(p).__name__
             for p in getattr(cute_kernel, "_helion_cute_wrapper_plans", ())]
    import importlib
    for module in ("helion.runtime.cute.launcher", "helion.runtime"):
        try:
            found = getattr(importlib.import_module(module), "default_cute_launcher", None)
        except ImportError:
            continue
        if found is not None and found is not default_cute_launcher:
            return found
    raise BackendUnsupported("cute", f"wrapper plans {kinds} (cutecall launches kernels "
                             "without them; Helion's own launcher is not importable)")


# ---------------------------------------------------------------------------
# One C++ launcher per (kernel, block, options): a bounded cache this module
# owns (Helion's kernel objects are not ours to write attributes on). It
# holds each kernel while its entry lives, so identities are never reused.

_CACHE_SIZE = 256


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _cached(kernel, block, options):
    if isinstance(kernel, IdentityKey):
        kernel = kernel.obj
    return _HelionLaunch(kernel, block, options).launch


def _launcher(cute_kernel, block, options):
    try:
        return _cached(cute_kernel, block, options)
    except TypeError:
        if getattr(type(cute_kernel), "__hash__", None) is not None:
            raise  # not the key: an error of the launcher's own
        return _cached(IdentityKey(cute_kernel), block, options)


def _no_option(masks, operands) -> str:
    """How a Helion user asks for static extents: not at all."""
    return "nothing (Helion's launcher compiles what the kernel needs)"


def constexpr_flags(cute_kernel) -> tuple[bool, ...]:
    """Per kernel parameter: is it ``cutlass.Constexpr`` (string annotations
    included)."""
    sig = _signature.analyze(cute_kernel)
    return tuple(p.kind == _signature.CONSTEXPR for p in sig.params)


def normalize_scalar(value) -> tuple[str, Any]:
    """Helion's scalar kinds: ("bool" | "int" | "float", Python value)."""
    if isinstance(value, (bool, torch.SymBool)):
        return "bool", bool(value)
    if isinstance(value, (int, torch.SymInt)):
        return "int", int(value)
    if isinstance(value, (float, torch.SymFloat)):
        return "float", float(value)
    raise BackendUnsupported("cute", f"launcher scalar argument type: {type(value)}")


_RUNTIME_TYPE = {"bool": "Boolean", "int": "Int64", "float": "Float32"}


def _make_launch(cute_kernel, schema, block, cluster):
    """The launcher cutecall compiles for one schema: its signature says
    what each bound argument is (the stream; the grid as three Int32s; per
    non-constexpr kernel argument a tensor or a runtime scalar of Helion's
    type), so the driver binds it like any launcher; its body rebuilds the
    kernel's argument list (constexprs from the schema) and launches."""
    def cutecall_helion_launch(stream, grid_x, grid_y, grid_z, *values):
        it = iter(values)
        kernel_args = [entry[2] if entry[0] == "scalar_constexpr" else next(it)
                       for entry in schema]
        extra = {} if cluster is None else {"cluster": list(cluster)}
        cute_kernel(*kernel_args).launch(grid=(grid_x, grid_y, grid_z),
                                         block=block, stream=stream, **extra)

    P = inspect.Parameter
    params = [P("stream", P.POSITIONAL_ONLY, annotation="CUstream")] + \
        [P(f"grid_{c}", P.POSITIONAL_ONLY, annotation="Int32") for c in "xyz"] + \
        [P(f"arg{i}", P.POSITIONAL_ONLY,
           annotation="cute.Tensor" if e[0] == "tensor" else _RUNTIME_TYPE[e[1]])
         for i, e in enumerate(schema) if e[0] != "scalar_constexpr"]
    cutecall_helion_launch.__signature__ = inspect.Signature(params)
    return cutecall_helion_launch


class _HelionLaunch:
    def __init__(self, cute_kernel, block, options):
        self.kernel = cute_kernel
        self.block = block
        self.options = options
        self.name = getattr(cute_kernel, "__name__", None) or "cute_kernel"
        self.flags = constexpr_flags(cute_kernel)
        cluster = getattr(cute_kernel, "_cutecall_cluster_shape", None) or \
            getattr(cute_kernel, "_helion_cute_cluster_shape", None)
        self.cluster = None if cluster is None else tuple(int(c) for c in cluster)
        self.launch = _core.TensorLauncher(
            self.name, [False] * _GRID + list(self.flags), self._on_miss)
        self.first_call = LaunchObject(self)  # binds, specializes, the entry
        self._launchers: dict[tuple, Launcher] = {}  # per schema

    def entry(self, i: int, a) -> tuple:
        """Helion's schema entry of argument `i`: ("tensor", dtype, rank),
        ("scalar", kind) or ("scalar_constexpr", kind, value)."""
        if isinstance(a, torch.Tensor):
            return ("tensor", str(a.dtype), a.ndim)
        kind, value = normalize_scalar(a)
        if i < len(self.flags) and self.flags[i]:
            return ("scalar_constexpr", kind, value)
        return ("scalar", kind)

    def device_of(self, values):
        """Checks every argument as Helion does, in order; returns the one
        device of the tensors (None without a tensor)."""
        device = None
        for i, a in enumerate(values):
            if not isinstance(a, torch.Tensor):
                normalize_scalar(a)  # raises for an unsupported scalar type
                continue
            if a.device.type != "cuda":
                raise BackendUnsupported("cute", "launcher requires CUDA tensors")
            if a.ndim <= 0:
                raise BackendUnsupported("cute", "launcher requires tensor rank >= 1")
            if dtypes.lookup(a.dtype) is None:
                raise BackendUnsupported("cute", f"dtype: {a.dtype}")
            if device is not None and a.device != device:
                raise ValueError(f"cutecall: argument {i} of '{self.name}' is on "
                                 f"{a.device} but an earlier tensor is on "
                                 f"{device}; one launch runs on one device")
            device = a.device
        return device

    # -- the description step (the launch object does the rest) --------------

    def bind(self, args) -> BoundCall:
        """A launch's arguments (grid x, y, z first) bound to the launcher of
        their schema: the grid and the non-constexpr arguments."""
        values = args[_GRID:]
        schema = tuple(self.entry(i, a) for i, a in enumerate(values))
        launcher = self._launchers.get(schema)
        if launcher is None:
            launcher = Launcher(
                _make_launch(self.kernel, schema, self.block, self.cluster),
                name=self.name, compile_options=self.options, hint=_no_option,
                keeps_static_masks=True)
            self._launchers[schema] = launcher
        positions = tuple(range(_GRID)) + tuple(
            _GRID + i for i, e in enumerate(schema) if e[0] != "scalar_constexpr")
        bound = [args[c] if c < _GRID or schema[c - _GRID][0] == "tensor"
                 else normalize_scalar(args[c])[1] for c in positions]
        binding, tensors = launcher.bind(bound, is_array=_describe.is_tensor)
        return BoundCall(launcher, binding, tensors, len(args), positions)

    def check(self, bound: BoundCall, launch: bool) -> str:
        """The arch of the tensors' device (``device_of`` checked them as
        Helion does, before binding)."""
        cuda = next((t.device for t in bound.arrays if isinstance(t, torch.Tensor)
                     and t.device.type == "cuda"), None)
        return _describe.device_arch(cuda)

    def describe(self, name: str, index: int, t, props, mask: int, dims):
        """Tensor `index` of a bound launch (``arg<k>``, its position among
        Helion's arguments) with C++'s `props`, `mask` compiled in."""
        return _describe.describe(name, index, t, props, mask, dims)

    measure = staticmethod(_describe.tensor_props)

    @property
    def static_masks(self):
        """Per argument, what the last static fallback compiled in (None:
        nothing)."""
        return self.first_call.static_masks

    def _on_miss(self, args, props):
        device = self.device_of(args[_GRID:])
        if device is None:
            raise BackendUnsupported("cute", "launches without a tensor argument")
        return self.first_call.entry(args, props)

    def spec_of(self, args, props, arch: str):
        """The KernelSpec and per-argument ``_core.ArgUse`` of a launch with
        arguments `args` (grid x, y, z first) whose tensors have C++'s
        `props`, without compiling."""
        return self.first_call.spec_of(args, props, arch)
