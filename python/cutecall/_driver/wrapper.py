"""The generated entry point every cutecall kernel is compiled through.

``cutecall_entry`` is a ``@cute.jit`` function whose runtime parameters are
the flat ABI of ``docs/abi.md``: the stream, then per tensor operand a data
pointer followed by its dynamic shape values (and, for strided operands, its
dynamic strides). Everything else -- dtypes, ranks, static extents,
divisibility, pytree structure, the user's launcher and its constexprs -- is
baked in through the ``Constexpr`` parameter ``spec``. Tensors are rebuilt
with ``cute.make_tensor(ptr, layout)``: a view of the caller's memory, never
a copy.

This module imports the CuTe DSL at import time; import it only to compile.
The DSL needs real source files, which is why this lives in its own module.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cuda.bindings.driver as cuda

from . import dsl, layout as _layout
from .slots import SlotKind


def _assume(v, divisibility: int):
    """`v` with its divisibility made known to the compiler (a no-op on
    static values, which the compiler sees already)."""
    if isinstance(v, int) or divisibility <= 1:
        return v
    return cute.assume(v, divby=divisibility)


def _cap(op) -> int:
    return _layout.class_cap(_layout.element_bits(op.cutlass_dtype,
                                                  op.elem_bytes))


def _as_i64(v):
    return v if isinstance(v, int) else cutlass.Int64(v)


def _compact_strides(shape, order):
    """Strides of a compact layout. ``order[d]`` ranks dim d's stride
    (0 = fastest), the CuTe convention: row-major rank-3 is (2, 1, 0)."""
    strides = [None] * len(shape)
    acc = 1
    for d in sorted(range(len(shape)), key=lambda d: order[d]):
        strides[d] = acc
        if isinstance(acc, int) and isinstance(shape[d], int):
            acc = acc * shape[d]
        else:
            acc = _as_i64(acc) * _as_i64(shape[d])
    return tuple(strides)


def build_tensors(slots, spec):
    """Rebuilds the kernel's tensors from the flat slots (trace time)."""
    tensors = []
    symbols = {}  # tied-dim symbol -> its runtime value
    k = 0
    for op in spec.operands:
        ptr = slots[k]
        k += 1
        shape = []
        for d in range(op.rank):
            if op.static_shape[d] is not None:
                shape.append(op.static_shape[d])
                continue
            sym = op.tie[d] if op.tie else -1
            if sym >= 0 and sym in symbols:
                v = symbols[sym]
            else:
                v = slots[k]
                k += 1
                if sym >= 0:
                    symbols[sym] = v
            shape.append(_assume(v, op.divisibility[d]))
        shape = tuple(shape)
        if op.strided:
            stride_div = op.stride_div or (1,) * op.rank
            stride = []
            for d in range(op.rank):
                if op.static_stride[d] is not None:
                    stride.append(op.static_stride[d])
                else:
                    stride.append(_assume(slots[k], stride_div[d]))
                    k += 1
            stride = tuple(stride)
        else:
            stride_div = _layout.compact_stride_divisibility(
                op.static_shape, op.divisibility, op.order, _cap(op))
            stride = tuple(_assume(v, dv) for v, dv in
                           zip(_compact_strides(shape, op.order), stride_div))
        layout = cute.make_layout(shape, stride=stride)
        if op.mode is not None:
            layout = cute.select(layout, mode=list(op.mode))
        tensors.append(cute.make_tensor(ptr, layout))
    return tensors, list(slots[k:])


def call_launcher(stream, tensors, scalars, spec):
    """Calls the user's launcher with the signature it declares: each
    positional parameter gets what its :class:`~slots.Slot` names (the
    stream, an input pytree rebuilt in its authors' own containers with
    tensors, runtime scalars and compile-time values, an output, a runtime
    scalar, None); once a parameter is left to its default, later ones go
    by keyword."""
    n_in = spec.num_inputs
    sources = {SlotKind.INPUT: spec.input_tree.rebuild(iter(tensors[:n_in]), scalars),
               SlotKind.OUTPUT: spec.output_tree.unflatten(tensors[n_in:]),
               SlotKind.SCALAR: scalars}
    args, kwargs = [], dict(spec.constexprs)
    by_keyword = False
    for name, slot in zip(spec.param_names, spec.slots):
        if slot.kind == SlotKind.DEFAULT:
            by_keyword = True
            continue
        value = stream if slot.kind == SlotKind.STREAM else \
            None if slot.kind == SlotKind.NONE else sources[slot.kind][slot.index]
        if by_keyword:
            kwargs[name] = value
        else:
            args.append(value)
    for name, s in spec.keyword_scalars:
        kwargs[name] = scalars[s]
    for name, scalar_type, value in spec.scalar_defaults:
        kwargs[name] = getattr(cutlass, scalar_type)(value)
    with dsl.launches_on(stream):
        spec.launcher(*args, **kwargs)


@cute.jit
def cutecall_entry(stream: cuda.CUstream, *slots, spec: cutlass.Constexpr):
    tensors, scalars = build_tensors(slots, spec)
    call_launcher(stream, tensors, scalars, spec)


def example_slots(spec):
    """Placeholder runtime arguments that fix the entry point's signature."""
    args = []
    seen = set()
    for op in spec.operands:
        dtype = getattr(cutlass, op.cutlass_dtype)
        args.append(cute.runtime.make_ptr(dtype, 0, cute.AddressSpace.gmem,
                                          assumed_align=op.align))
        for d in range(op.rank):
            if op.static_shape[d] is not None:
                continue
            sym = op.tie[d] if op.tie else -1
            if sym >= 0:
                if sym in seen:
                    continue
                seen.add(sym)
            args.append(cutlass.Int64(0) if op.shape64 else cutlass.Int32(0))
        if op.strided:
            for d in range(op.rank):
                if op.static_stride[d] is None:
                    args.append(cutlass.Int64(0))
    for t in spec.scalar_types:
        args.append(getattr(cutlass, t)(0))
    return args
