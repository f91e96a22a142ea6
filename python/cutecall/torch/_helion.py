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

import inspect
import threading
from typing import Any

import torch

from .. import _core
from .._driver import dtypes, signature as _signature
from .._driver.pipeline import Launcher, arg_masks, arg_uses
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

    Raises ValueError for bad ``cute_compile_options``, ``block`` or
    ``grid``; BackendUnsupported for other keywords, non-CUDA or rank-0
    tensors, unsupported dtypes and scalar types.
    """
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


# ---------------------------------------------------------------------------
# One C++ launcher per (kernel, block, options), kept on the kernel object.

_lock = threading.Lock()
_fallback: dict[int, tuple[object, dict]] = {}  # kernels that refuse attributes


def _launcher(cute_kernel, block, options):
    cache = getattr(cute_kernel, "_cutecall_launchers", None)
    if cache is None:
        cache = _kernel_cache(cute_kernel)
    launcher = cache.get((block, options))
    if launcher is None:
        with _lock:
            launcher = cache.get((block, options))
            if launcher is None:
                launcher = _HelionLaunch(cute_kernel, block, options).launch
                cache[(block, options)] = launcher
    return launcher


def _kernel_cache(cute_kernel) -> dict:
    with _lock:
        try:
            cache = cute_kernel.__dict__.setdefault("_cutecall_launchers", {})
        except AttributeError:
            entry = _fallback.setdefault(id(cute_kernel), (cute_kernel, {}))
            cache = entry[1]
        return cache


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
        self.static_masks = None  # per argument, after a static fallback
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

    def _describe(self, args, props):
        """(launcher, binding, operand descriptions, bound positions) of a
        launch with arguments `args` (grid x, y, z first) whose tensors have
        C++'s `props`: the schema's launcher bound to the grid and the
        non-constexpr arguments."""
        values = args[_GRID:]
        schema = tuple(self.entry(i, a) for i, a in enumerate(values))
        launcher = self._launchers.get(schema)
        if launcher is None:
            launcher = Launcher(
                _make_launch(self.kernel, schema, self.block, self.cluster),
                name=self.name, compile_options=self.options, hint="helion",
                keeps_static_masks=True)
            self._launchers[schema] = launcher
        positions = list(range(_GRID)) + [_GRID + i for i, e in enumerate(schema)
                                          if e[0] != "scalar_constexpr"]
        bound = [args[c] if c < _GRID or schema[c - _GRID][0] == "tensor"
                 else normalize_scalar(args[c])[1] for c in positions]
        binding, tensors = launcher.bind(bound, is_array=_describe.is_tensor)
        props = [p for p in props if p is not None]  # per tensor, in order
        if len(props) != len(tensors):
            props = [_describe.tensor_props(t) for t in tensors]
        operands = []
        for n, k in enumerate(binding.arrays):
            c = positions[k]  # every argument is one leaf: c indexes both
            operands.append(_describe.describe(
                f"arg{c - _GRID}", n, args[c], props[n],
                self.static_masks[c] if self.static_masks else 0))
        return launcher, binding, operands, positions

    def _on_miss(self, args, props):
        device = self.device_of(args[_GRID:])
        if device is None:
            raise BackendUnsupported("cute", "launches without a tensor argument")
        launcher, binding, operands, positions = self._describe(args, props)
        result = launcher.specialize(operands, binding,
                                     device_arch=_describe.device_arch(device))
        masks = arg_masks(binding, result.masks, len(args), positions=positions)
        if any(masks) and masks != self.static_masks:  # they key later calls
            self.static_masks = masks
            self.launch.set_static(masks)
        return launcher.entry(result, arg_uses(binding, len(args), positions=positions))

    def specialize(self, args, props, arch: str):
        """The KernelSpec and per-argument ``_core.ArgUse`` of a launch with
        arguments `args` (grid x, y, z first) whose tensors have C++'s
        `props`, without compiling."""
        launcher, binding, operands, positions = self._describe(args, props)
        return (launcher.spec(operands, binding, device_arch=arch),
                arg_uses(binding, len(args), positions=positions))
