"""``TensorSpec``: how a user asks for one array operand to reach the kernel
(NVIDIA's ``cutlass.jax.TensorSpec`` fields, plus ``dims``). A front turns it
into an operand description (``operand.OperandDesc``); the driver checks it.
Pure data: no framework, no CuTe DSL."""

from __future__ import annotations

import dataclasses

__all__ = ["TensorSpec"]


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """How one array operand reaches the kernel as a ``cute.Tensor``.

    Args:
      layout: CuTe stride order of the array in memory, ``layout[d]`` ranking
        dim ``d``'s stride (0 = fastest). ``None`` is row-major. XLA is asked
        for this physical layout, so no transpose is added by cutecall.
      mode: a permutation applied to the tensor's modes (a view, no copy).
      static: ``True`` bakes every extent into the kernel, or a tuple of bools
        per dim. Default: every dim is a runtime value (one compile serves
        every shape).
      divisibility: an int per dim (or one int for all) the kernel may assume
        divides that extent; checked before every launch. Default: derived
        from the extent at trace time -- its divisibility class, the largest
        power of two dividing it, capped at 16 bytes' worth of elements
        (``docs/abi.md``, layout specialization); every shape in a class
        shares one compile. ``divisibility=1`` assumes nothing.
      ptr_assumed_align: alignment in bytes the kernel may assume of the data
        pointer; checked before every launch. Default 16.
      dims: a name (or None) per dim. Dims of any operands that share a name
        are one runtime value: the kernel receives it once (so the compiler
        knows they are equal) and the extents are checked equal before every
        launch. cutecall's addition; NVIDIA's TensorSpec has no such field.
    """

    layout: tuple[int, ...] | None = None
    mode: tuple[int, ...] | None = None
    static: bool | tuple[bool, ...] | None = None
    divisibility: int | tuple[int, ...] | None = None
    ptr_assumed_align: int = 16
    dims: tuple[str | None, ...] | None = None
