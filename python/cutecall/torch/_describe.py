"""The torch front's description step: tensors (or tensors described, not
allocated: :class:`TensorDesc`) as the driver's operand descriptions, and
the device a launch runs on.

The C++ launcher (``_core.TensorLauncher``) reads every tensor itself and
keys a call by its dtypes, ranks, unit-stride dims, pointer alignments,
64-bit extents, the divisibility class of every extent and stride, and the
device; on a miss it hands Python each tensor's ``_core.LayoutProps``, so
the description, and the kernel compiled from it, is exactly the
specialization C++ will look up. Ahead-of-time compiles measure tensors with
the same C++ function (``_core.layout_props``).
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from .. import _core
from .._driver import dtypes, target
from .._driver.operand import MAX_RANK, SOURCE_ARG, OperandDesc
from .._driver.binding_builder import check_argument
from .._driver.launch_options import open_params
from .._driver.signature import CONSTEXPR, SCALAR


@dataclasses.dataclass(frozen=True)
class TensorDesc:
    """A tensor described, not allocated: what ``Kernel.compile`` needs of
    an argument to compile its specialization on a machine without a GPU.

    Args:
      shape: the extents.
      dtype: a ``torch.dtype``.
      strides: in elements (default: contiguous row-major).
      align: the data pointer's alignment in bytes (default 16).
    """

    shape: tuple
    dtype: torch.dtype
    strides: tuple | None = None
    align: int = 16

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(x) for x in self.shape))
        if not self.shape:
            raise ValueError("cutecall: TensorDesc shape (): rank-0 tensors are not "
                             "supported; describe a shape-(1,) tensor")
        bad = [(d, n) for d, n in enumerate(self.shape) if n < 0]
        if bad:
            raise ValueError(f"cutecall: TensorDesc shape {self.shape}: dim {bad[0][0]} "
                             f"= {bad[0][1]} is negative; extents are >= 0")
        if self.strides is None:
            acc, strides = 1, []
            for n in reversed(self.shape):
                strides.append(acc)
                acc *= max(n, 1)
            object.__setattr__(self, "strides", tuple(reversed(strides)))
        if len(self.strides) != len(self.shape):
            raise ValueError(f"cutecall: TensorDesc strides {self.strides} do "
                             f"not match shape {self.shape}")
        if dtypes.lookup(self.dtype) is None:
            raise TypeError(f"cutecall: TensorDesc dtype {self.dtype} has no "
                            f"CuTe DSL type; supported: {dtypes.supported()}")
        if self.align < 1 or self.align & (self.align - 1):
            raise ValueError(f"cutecall: TensorDesc align must be a power of "
                             f"two, got {self.align}")

    @property
    def address(self) -> int:
        return self.align  # a pointer aligned exactly that much

    @property
    def device(self) -> torch.device:
        return torch.device("meta")

    def stride(self) -> tuple:
        """The strides, spelled as ``torch.Tensor.stride()``."""
        return self.strides

    def dim(self) -> int:
        return len(self.shape)


def is_tensor(x) -> bool:
    return isinstance(x, (torch.Tensor, TensorDesc))


def tensor_props(t) -> "_core.LayoutProps":
    """The layout facts C++ reads from a tensor (``_core.layout_props``),
    computed for any tensor, meta and CPU ones included (a meta tensor's
    pointer counts as 16-byte aligned) or a :class:`TensorDesc`."""
    address = getattr(t, "address", None)
    if address is None:
        try:
            address = 0 if t.device.type == "meta" else t.data_ptr()
        except (RuntimeError, NotImplementedError):  # torch.compile's fake tensors
            address = 0
    bits = 8 * dtypes.cutlass_dtype(t.dtype, "tensor")[1]
    return _core.layout_props(list(t.shape), list(t.stride()), int(address), bits)


def describe(name: str, index: int, t, props, mask: int = 0,
             dims: tuple | None = None) -> OperandDesc:
    """The strided operand tensor `t` compiles to: every extent and stride a
    runtime value of the divisibility class C++ measured (`props`), except
    the unit stride (compiled in as 1, so the compiler can vectorize along
    it) and what `mask` compiles in (a StaticMask: the static fallback or
    ``kernel(static=...)``)."""
    return OperandDesc(
        name=name, source=SOURCE_ARG, index=index, dtype=t.dtype,
        shape=tuple(int(x) for x in t.shape), strides=tuple(t.stride()),
        align=props.align, extent_div=props.extent_classes,
        stride_div=props.stride_classes, unit_dim=props.unit_dim,
        wide=props.wide, static=mask, dims=dims)


@functools.lru_cache(maxsize=None)
def _capability_arch(index: int) -> str:
    return target.arch_from_capability(*torch.cuda.get_device_capability(index))


def device_arch(device: torch.device | None) -> str:
    """The arch to compile for: ``$CUTECALL_ARCH``, else `device`'s compute
    capability (sm_90a on an H100), else the driver's default."""
    if device is None or device.type != "cuda":
        return target.default_arch()
    index = device.index if device.index is not None else torch.cuda.current_device()
    return target.default_arch(_capability_arch(index))


def check_kinds(k, args, tensor_types) -> list[str]:
    """Raises for an argument no parameter of launch object `k` can take (a
    tensor for a runtime scalar); returns how errors name each argument. A
    ``Constexpr`` parameter takes any value (compiled in)."""
    params = open_params(k.launcher, args) if k.sig.inspected else []
    what = [f"argument {params[i].name!r}" if i < len(params) else f"argument {i}"
            for i in range(len(args))]
    for i, a in enumerate(args):
        kind = params[i].kind if i < len(params) else None
        if kind == CONSTEXPR:
            continue
        if kind == SCALAR and isinstance(a, tensor_types):
            raise TypeError(f"cutecall: {what[i]} of '{k.name}' is a runtime "
                            f"scalar ({params[i].scalar_type}); pass a Python "
                            f"value, got a tensor {_shown(a)}")
        check_foreign(a, f"{what[i]} of '{k.name}'")
        check_argument(a, f"{what[i]} of '{k.name}'",
                       lambda x: isinstance(x, tensor_types))
    return what


def _shown(a) -> str:
    """``float32[8, 4]``: an array's dtype and shape."""
    return f"{dtypes.dtype_name(a.dtype)}{list(a.shape)}"


def check_foreign(a, what: str) -> None:
    """A NumPy or JAX array where a torch tensor goes: says how to make
    one (the C++ launcher reads torch tensors only)."""
    framework = type(a).__module__.split(".")[0]
    if framework not in ("numpy", "jax", "jaxlib") or not hasattr(a, "shape") \
            or getattr(a, "shape", None) == ():
        return
    shown = _shown(a)
    fix = "torch.from_numpy(x).cuda()" if framework == "numpy" else \
        "torch.from_dlpack(x) (the same GPU memory)"
    raise TypeError(f"cutecall: {what} is a {'NumPy' if framework == 'numpy' else 'JAX'} "
                    f"array {shown}; cutecall.torch launches torch tensors on a CUDA "
                    f"device: pass {fix}")


def check_tensor(t, what: str, device, on_device: bool = True):
    """Raises, naming `what` ("argument 'x' of 'kernel'") and the value,
    for a tensor no kernel can take; with `on_device` (a launch), also for
    one no launch can take: not on CUDA, or not on `device` (the earlier
    tensors') when that is known. Returns its CUDA device, or None."""
    if on_device and t.device.type != "cuda":
        raise ValueError(f"cutecall: {what} is on {t.device}; cutecall "
                         "launches CUDA tensors")
    if t.dim() == 0:
        raise ValueError(f"cutecall: {what} is rank 0; pass a shape-(1,) tensor")
    if t.dim() > MAX_RANK:
        raise ValueError(f"cutecall: {what} has rank {t.dim()} > {MAX_RANK}")
    if dtypes.lookup(t.dtype) is None:
        raise TypeError(f"cutecall: {what} has dtype {t.dtype}, which has no "
                        f"CuTe DSL type; supported: {dtypes.supported()}")
    if on_device and device is not None and t.device != device:
        raise ValueError(f"cutecall: {what} is on {t.device} but an earlier "
                         f"tensor is on {device}; one launch runs on one device")
    return t.device if t.device.type == "cuda" else None
