"""What both torch fronts share: tensor → operand spec, the device's arch,
and handing a compiled kernel to the C++ launcher.

The C++ launcher (``_core.TensorLauncher``) reads every tensor itself and
decides which specialization a call needs from dtype, rank, the unit-stride
dim, the pointer's alignment, whether a dim needs 64 bits, and the device;
it passes the three layout facts it computed (``props``) to Python on a
miss, so Python compiles exactly the specialization C++ will look up.
"""

from __future__ import annotations

import os
import threading

import torch

from .._driver import compiler as _compile
from .._driver import runtime as _runtime
from .._driver import signature as _signature
from .._driver import spec as _spec
from .. import _core

# How a call argument reaches the plan (kernel_entry.h's UseKind): OUTPUT
# is a tensor the kernel writes; a launch whose outputs are all empty does
# nothing.
USE_TENSOR, USE_SCALAR, USE_IGNORE, USE_OUTPUT = (
    _core.UseKind.TENSOR, _core.UseKind.SCALAR, _core.UseKind.IGNORE,
    _core.UseKind.OUTPUT)


def dtype_entry(dtype: torch.dtype) -> tuple[str, int] | None:
    """(CuTe DSL type name, bytes per element) of a torch dtype, or None.
    bool travels as Uint8 (the DSL has no i1 tensors in global memory)."""
    return _spec._DTYPES.get(str(dtype).removeprefix("torch."))


def supported_dtypes() -> str:
    return ", ".join(sorted(_spec._DTYPES))


def operand(name: str, index: int, t, props, mask: int = 0) -> _spec.OperandSpec:
    """The strided operand a tensor compiles to: every extent and stride a
    runtime value of its divisibility class (C++ measured them: `props`),
    except the unit stride (static 1, so the compiler can vectorize along
    it) and what `mask` compiles in (bit d: extent d; bit 8+d: stride d;
    the static fallback). `t` is a tensor or anything with ``shape``,
    ``stride()`` and ``dtype``."""
    unit_dim, align, wide = props.unit_dim, props.align, props.wide
    extent_div, stride_div = props.extent_classes, props.stride_classes
    cutlass_name, nbytes = dtype_entry(t.dtype)
    rank = len(t.shape)
    shape, strides = tuple(int(x) for x in t.shape), tuple(t.stride())
    static_shape = tuple(shape[d] if mask >> d & 1 else None
                         for d in range(rank))
    static_stride = tuple(
        (strides[d] if shape[d] > 1 else 0) if mask >> (8 + d) & 1 else
        1 if d == unit_dim else None for d in range(rank))
    return _spec.OperandSpec(
        name=name, source=_spec.SOURCE_ARG, index=index,
        cutlass_dtype=cutlass_name, elem_bytes=nbytes, rank=rank,
        static_shape=static_shape,
        divisibility=tuple(1 if s is not None else int(v)
                           for s, v in zip(static_shape, extent_div)),
        order=tuple(range(rank - 1, -1, -1)), mode=None, align=int(align),
        shape64=bool(wide), strided=True, static_stride=static_stride,
        dims=(None,) * rank, tie=(-1,) * rank,
        stride_div=tuple(1 if s is not None else int(v)
                         for s, v in zip(static_stride, stride_div)))


def tensor_props(t) -> tuple:
    """The layout facts C++ reads from a tensor (``_core.layout_props``),
    computed for any tensor, meta and CPU ones included (a meta tensor's
    pointer counts as 16-byte aligned) or a :class:`TensorDesc`."""
    address = getattr(t, "address", None)
    if address is None:
        address = 0 if t.device.type == "meta" else t.data_ptr()
    bits = 8 * dtype_entry(t.dtype)[1]
    return _core.layout_props(list(t.shape), list(t.stride()), int(address),
                              bits)


_arch_lock = threading.Lock()
_arch: dict[int, str] = {}


def device_arch(device: torch.device) -> str:
    """$CUTECALL_ARCH, else the compute capability of `device` (sm_90a on
    an H100)."""
    env = os.environ.get("CUTECALL_ARCH")
    if env:
        return env
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _arch_lock:
        if index not in _arch:
            major, minor = torch.cuda.get_device_capability(index)
            _arch[index] = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
        return _arch[index]


def use(kind, index: int = 0, scalar_type: str | None = None) -> "_core.ArgUse":
    """How one call argument reaches the plan (a `_core.ArgUse`)."""
    return _core.ArgUse(kind, index, getattr(_core.ScalarType,
                                             scalar_type or "Boolean"))


def registration(kernel: _compile.CompiledKernel, uses) -> "_core.KernelEntry":
    """The entry `TensorLauncher` registers: the compiled kernel and, per
    call argument, how it reaches the plan (`uses`, `_core.ArgUse`s)."""
    path = _runtime.find_runtime_library()
    if path and not _core.runtime_path():
        _core.set_runtime_path(path)
    return _core.KernelEntry(
        module=kernel.module, sha256=kernel.sha256, function=kernel.function,
        kernel=kernel.name, plan=list(kernel.plan),
        operand_names=kernel.operand_names, symbol_names=kernel.symbol_names,
        uses=list(uses))


def compile_spec(spec: _compile.KernelSpec, name: str, options: str | None,
                 arch: str) -> _compile.CompiledKernel:
    resolved, arch = _compile.resolve_options(options, arch)
    return _compile.get_or_compile(spec, name, resolved, arch)
