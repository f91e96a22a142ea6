"""Layout specialization: what a kernel may assume of a dynamic layout.

The CuTe analogue of Triton's divisibility-by-16 specialization. Every
dynamic extent and every dynamic stride of a tensor operand carries a
*divisibility class*: the largest power of two that divides its value,
capped at 16 bytes' worth of elements (8 for bf16, 4 for f32, 32 for 4-bit
types). The class is derived from the actual value -- at trace time in JAX,
at launch time in torch -- compiled in (``cute.assume(v, divby=class)``) and
checked by the C++ runtime before every launch. All shapes in one class
share one compile; multiples of 16 bytes, the common case, are one class.

Kernels that vectorize global memory accesses (QuACK, FlashAttention-4,
CUTLASS's examples) need this: with divisibility 1 the DSL cannot prove a
128-bit copy aligned and fails IR verification.

Pure Python, no CuTe DSL import. The C++ twin of :func:`divisibility_class`
is ``ClassLog2`` in ``cpp/python/tensor_signature.{h,cc}``;
``_core.layout_props`` exposes it so the two are tested against each other.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

# CuTe DSL element type name -> bits per element (sub-byte types are 4).
_SUB_BYTE = {"Int4": 4, "Float4E2M1FN": 4}

# The widest vector access: 16 bytes.
VECTOR_BITS = 128


def element_bits(cutlass_name: str, elem_bytes: int) -> int:
    return _SUB_BYTE.get(cutlass_name, 8 * elem_bytes)


def class_cap(bits: int) -> int:
    """16 bytes' worth of elements of `bits` bits (at least 1)."""
    return max(1, VECTOR_BITS // bits)


def divisibility_class(value: int, cap: int) -> int:
    """The largest power of two dividing `value`, at most `cap` (a power of
    two); 0 is divisible by everything, so its class is `cap`. Negative
    values (torch strides may be) use their magnitude."""
    value = abs(int(value))
    if value == 0:
        return cap
    low_bit = value & -value
    return min(low_bit, cap)


def extent_classes(shape: Sequence, static: Sequence[bool], cap: int) -> tuple:
    """Per dim: the class of a dynamic extent known at trace time, else 1
    (static dims are compiled in; symbolic dims promise nothing)."""
    return tuple(divisibility_class(v, cap)
                 if isinstance(v, (int, np.integer)) and not s else 1
                 for v, s in zip(shape, static))


def compact_stride_divisibility(static_shape: Sequence, divisibility: Sequence,
                                order: Sequence[int], cap: int) -> tuple:
    """Per dim: what the kernel may assume of the stride of a compact
    operand (strides computed from extents in `order`, fastest first).

    A stride is the product of the faster extents, so it is divisible by the
    product of their classes (static extents count with their own
    power-of-two part); capped like any class. Sound because C++ checks
    every dynamic extent's class before launch.
    """
    rank = len(order)
    out = [1] * rank
    acc = 1
    for d in sorted(range(rank), key=lambda d: order[d]):
        out[d] = min(acc, cap)
        s = static_shape[d]
        acc *= divisibility_class(s, cap) if s is not None else divisibility[d]
        acc = min(acc, cap)
    return tuple(out)
