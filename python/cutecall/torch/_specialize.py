"""A launch object's specializations: one call's arguments in, a KernelSpec
and the per-argument uses C++ registers out.

Shared by the C++ miss path (``Kernel._on_miss``: the tensors are real, C++
measured their layouts) and ahead-of-time compiles (``Kernel.compile``:
tensors may be meta tensors, CPU tensors or :class:`TensorDesc`\\ s, and
``_common.tensor_props`` measures them with the same C++ function). Both
produce the same specialization key for the same layouts, so a kernel
compiled ahead of time is found, not recompiled, by the first launch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import torch

from .._driver import binding as _binding
from .._driver import compiler as _compile
from .._driver import fallback as _fallback
from .._driver import signature as _signature
from .._driver import spec as _spec
from . import _common


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
        if self.strides is None:
            acc, strides = 1, []
            for n in reversed(self.shape):
                strides.append(acc)
                acc *= max(n, 1)
            object.__setattr__(self, "strides", tuple(reversed(strides)))
        if len(self.strides) != len(self.shape):
            raise ValueError(f"cutecall: TensorDesc strides {self.strides} do "
                             f"not match shape {self.shape}")
        if _common.dtype_entry(self.dtype) is None:
            raise TypeError(f"cutecall: TensorDesc dtype {self.dtype} has no "
                            f"CuTe DSL type; supported: "
                            f"{_common.supported_dtypes()}")
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


def bind(kernel, args) -> _binding.Binding:
    """Binds a launcher-order call (outputs included) to the launcher's
    parameters; ``None`` arguments pass ``None`` (``("none",)`` slots)."""
    shadow = [a if not is_tensor(a) else _Marker(a) for a in args]
    binding, _ = _binding.bind(kernel.sig, shadow, {}, 0, "inputs_first",
                               {k for k, _ in kernel.constexprs})
    slots, arrays = [], []
    for slot in binding.slots:
        if slot[0] == "in":
            position = binding.arrays[slot[1]]
            if args[position] is None:
                slots.append(("none",))
                continue
            slot = ("in", len(arrays))
            arrays.append(position)
        slots.append(slot)
    return dataclasses.replace(binding, slots=tuple(slots), arrays=tuple(arrays))


class _Marker:
    """Stands for a tensor in binding (which must not touch its data)."""

    def __init__(self, t):
        self.shape, self.dtype = tuple(t.shape), t.dtype


def masks_of(rung: _fallback.Rung, binding: _binding.Binding, n: int) -> list:
    """The C++ launcher's per-argument static masks for `rung`."""
    masks = [0] * n
    for a, position in enumerate(binding.arrays):
        m = 0
        for k, d in rung.static_dims:
            if k == a:
                m |= 1 << d
        if rung.static_strides:
            m |= 0xff00
        masks[position] = m
    return masks


def build(kernel, args: Sequence[Any], props: Sequence, arch: str,
          masks: Sequence[int] | None):
    """(KernelSpec, uses) for a launcher-order call whose tensors have
    `props`, compiling in what `masks` names (None: nothing)."""
    binding = bind(kernel, args)
    names = [p.name for p in kernel.params] if kernel.sig.inspected else []
    operands = []
    for a, k in enumerate(binding.arrays):
        if props[k] is None:
            raise RuntimeError(f"cutecall: '{kernel.name}': tensor argument "
                               f"{k} could not be read through DLPack")
        nm = names[k] if k < len(names) else f"arg{k}"
        operands.append(_common.operand(nm, a, args[k], props[k],
                                        masks[k] if masks else 0))
    operands, symbols = _tied(kernel, operands,
                              [tuple(int(x) for x in args[k].shape) for k in binding.arrays])
    scalar_types = tuple(s.scalar_type for s in binding.scalars)
    key = _spec.specialization_key(
        kernel.fingerprint, operands, "torch", "", kernel.constexprs,
        kernel.options,
        arch, _compile.versions(),
        extra=["torch", list(map(list, binding.slots)), list(scalar_types),
               list(symbols)])
    params = kernel.sig.params if kernel.sig.inspected else ()
    spec = _compile.KernelSpec(
        launcher=kernel.fn, constexprs=kernel.constexprs,
        operands=tuple(operands), num_inputs=len(operands),
        num_args=len(operands), num_rets=0,
        input_tree=_compile.FlatTree(len(operands)),
        output_tree=_compile.FlatTree(0), key=key,
        param_names=tuple(p.name for p in params) or
        tuple(f"p{i}" for i in range(len(binding.slots))),
        slots=binding.slots, keyword_scalars=binding.keyword_scalars,
        scalar_types=scalar_types, symbols=symbols,
        binding=_binding.describe(kernel.sig, binding))
    uses, s = [], 0
    operand_of = {k: a for a, k in enumerate(binding.arrays)}
    outputs = set(kernel.output_params)
    for k, arg in enumerate(args):
        if k in operand_of:
            written = k < len(names) and names[k] in outputs
            uses.append(_common.use(_common.USE_OUTPUT if written
                                    else _common.USE_TENSOR, operand_of[k]))
        elif arg is None:
            uses.append(_common.use(_common.USE_IGNORE))
        else:
            uses.append(_common.use(_common.USE_SCALAR, s, scalar_types[s]))
            s += 1
    return spec, uses, binding


def compile_call(kernel, args, props, arch: str):
    """(CompiledKernel, uses) for one call: the dynamic form, else the
    static-fallback ladder (the rung that compiles is kept by `kernel`, and
    its masks handed to the C++ launcher)."""
    options, arch = _compile.resolve_options(kernel.options, arch)
    if kernel.static_masks is not None:
        spec, uses, _ = build(kernel, args, props, arch, kernel.static_masks)
        return _compile.get_or_compile(spec, kernel.name, options, arch), uses
    spec, uses, binding = build(kernel, args, props, arch, None)
    tensors = [args[k] for k in binding.arrays]
    rungs = _fallback.ladder([op.name for op in spec.operands],
                             [tuple(int(x) for x in t.shape) for t in tensors])

    def form(rung):
        if rung is None:
            return spec
        return build(kernel, args, props, arch,
                     masks_of(rung, binding, len(args)))[0]

    compiled, _, level = _compile.compile_ladder(
        form, rungs, 0, kernel.name, options, arch, kernel.static_fallback,
        lambda rung: explicit(rung, binding, spec.operands))
    if level:
        kernel.use_static_masks(masks_of(rungs[level - 1], binding, len(args)))
    return compiled, uses


def explicit(rung, binding, operands) -> str:
    """The ``kernel(...)`` argument that asks for `rung` explicitly."""
    if rung.static_strides:
        return "cutecall.torch.kernel(..., static=True)"
    parts = []
    for a, op in enumerate(operands):
        mask = tuple((a, d) in rung.static_dims for d in range(op.rank))
        if any(mask):
            parts.append(f"{op.name!r}: {True if all(mask) else mask}")
    return "cutecall.torch.kernel(..., static={" + ", ".join(parts) + "})"


def dims_from_option(dims, params: Sequence[_signature.Param]) -> dict:
    """``kernel(dims=...)``: {parameter name: tuple of dim names}."""
    if dims is None:
        return {}
    if not isinstance(dims, dict):
        raise TypeError(f"cutecall: dims must be a dict {{parameter: (name or None "
                        f"per dim)}}, got {dims!r}")
    names = {p.name for p in params}
    out = {}
    for name, per_dim in dims.items():
        if name not in names:
            raise ValueError(f"cutecall: dims names {name!r}, which is not a "
                             f"parameter of the launcher ({sorted(names)})")
        if not isinstance(per_dim, (tuple, list)) or \
                any(d is not None and not isinstance(d, str) for d in per_dim):
            raise TypeError(f"cutecall: dims[{name!r}] must be a tuple of names "
                            f"(str) or None per dim, got {per_dim!r}")
        out[name] = tuple(per_dim)
    return out


def _tied(kernel, operands, shapes):
    """`operands` with ``kernel.dims`` applied and tied (``_spec.tie_dims``:
    one runtime value per shared name, checked in C++ at every launch)."""
    if not kernel.dims:
        return operands, ()
    named = []
    for op in operands:
        per_dim = kernel.dims.get(op.name)
        if per_dim is not None and len(per_dim) != op.rank:
            raise ValueError(f"cutecall: '{kernel.name}': dims[{op.name!r}] names "
                             f"{len(per_dim)} dims, but the tensor has rank {op.rank}")
        named.append(op if per_dim is None else dataclasses.replace(op, dims=per_dim))
    operands, symbols = _spec.tie_dims(named, shapes, kernel.name)
    return operands, tuple(symbols)


def masks_from_option(static, params: Sequence[_signature.Param]) -> list | None:
    """``kernel(static=...)`` as per-argument masks: True (every extent and
    stride of every tensor), or {parameter name: True | per-dim bools}."""
    if static is None or static is False:
        return None
    if static is True:
        return [0xffff] * len(params)
    if not isinstance(static, dict):
        raise TypeError(f"cutecall: static must be True, False, None or a dict "
                        f"{{parameter: True | tuple of bools}}, got {static!r}")
    names = [p.name for p in params]
    masks = [0] * len(params)
    for name, dims in static.items():
        if name not in names:
            raise ValueError(f"cutecall: static names {name!r}, which is not a "
                             f"tensor parameter; parameters: {', '.join(names)}")
        if dims is True:
            m = 0xff
        elif isinstance(dims, (tuple, list)) and \
                all(isinstance(x, bool) for x in dims):
            m = sum(1 << d for d, x in enumerate(dims) if x)
        else:
            raise TypeError(f"cutecall: static[{name!r}] must be True or a "
                            f"tuple of bools per dim, got {dims!r}")
        masks[names.index(name)] = m
    return masks
