"""NVIDIA's ``cutlass.jax`` names for types, layouts and arrays, with the
same meaning: the dtype maps, the layout orders, ``from_dlpack`` and
``JaxArray`` (``cutecall.jax_to_cutlass_dtype`` and the rest; the package
root reaches them lazily). Nothing here imports the CuTe DSL at import
time: the dtype maps and ``from_dlpack`` import it when called, with an
``ImportError`` naming the function when it is missing.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Sequence

import jax.numpy as jnp

def _dsl(what: str):
    """The ``cutlass`` module, or ImportError saying `what` needs it."""
    try:
        import cutlass
        return cutlass
    except Exception as e:  # a broken install raises more than ImportError
        raise ImportError(f"cutecall.{what} needs the CuTe DSL "
                          f"(nvidia-cutlass-dsl), which does not import here: "
                          f"{type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------------
# dtypes: NVIDIA's table (JAX dtype name -> cutlass type name)

_DTYPE_NAMES = {
    "bool": "Boolean", "int4": "Int4", "int8": "Int8", "int16": "Int16",
    "int32": "Int32", "int64": "Int64", "uint8": "Uint8", "uint16": "Uint16",
    "uint32": "Uint32", "uint64": "Uint64", "bfloat16": "BFloat16",
    "float16": "Float16", "float32": "Float32", "float64": "Float64",
    "float8_e8m0fnu": "Float8E8M0FNU", "float8_e5m2": "Float8E5M2",
    "float8_e4m3": "Float8E4M3", "float8_e4m3fn": "Float8E4M3FN",
    "float8_e4m3b11fnuz": "Float8E4M3B11FNUZ", "float4_e2m1fn": "Float4E2M1FN",
}


@functools.cache
def _cutlass_to_jax() -> dict:
    cutlass = _dsl("cutlass_to_jax_dtype")
    return {getattr(cutlass, c): jnp.dtype(j) for j, c in _DTYPE_NAMES.items()}


def jax_to_cutlass_dtype(dtype: Any) -> Any:
    """The CuTe DSL type of a JAX dtype (anything ``jnp.dtype`` accepts).

    >>> import jax.numpy as jnp, cutlass, cutecall
    >>> cutecall.jax_to_cutlass_dtype(jnp.bfloat16) is cutlass.BFloat16
    True

    Raises ValueError for a dtype without one (e.g. complex64). Note: a
    bool array reaches a cutecall kernel as a ``Uint8`` tensor of 0/1.
    """
    name = jnp.dtype(dtype).name
    if name not in _DTYPE_NAMES:
        raise ValueError(f"cutecall.jax_to_cutlass_dtype: dtype={name} has no "
                         f"CuTe DSL equivalent; supported: "
                         f"{', '.join(_DTYPE_NAMES)}")
    return getattr(_dsl("jax_to_cutlass_dtype"), _DTYPE_NAMES[name])


def cutlass_to_jax_dtype(dtype: Any) -> Any:
    """The JAX dtype (a ``numpy.dtype``) of a CuTe DSL type.

    >>> import jax.numpy as jnp, cutlass, cutecall
    >>> cutecall.cutlass_to_jax_dtype(cutlass.Float32) == jnp.float32
    True

    Raises ValueError for a type without one (e.g. ``cutlass.Float6E2M3FN``).
    """
    table = _cutlass_to_jax()
    try:
        return table[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"cutecall.cutlass_to_jax_dtype: dtype={dtype!r} has "
                         "no JAX equivalent; supported: cutlass."
                         f"{', cutlass.'.join(_DTYPE_NAMES.values())}") from None


# ---------------------------------------------------------------------------
# Layout orders: CuTe's minor-to-major ranks <-> JAX's major-to-minor dims

def _permutation(layout: Sequence[int], what: str) -> tuple[int, ...]:
    try:
        perm = tuple(operator.index(i) for i in layout)
    except TypeError:
        perm = None
    if perm is None or sorted(perm) != list(range(len(perm))):
        raise ValueError(f"cutecall.{what}: layout={layout!r} must be a "
                         f"permutation of 0..n-1")
    return perm


def cutlass_to_jax_layout_order(layout: Sequence[int] | None):
    """A CuTe layout order (``layout[d]`` = stride rank of dim ``d``, 0 the
    fastest; ``TensorSpec.layout``) as JAX's major-to-minor dim order.
    ``None`` stays ``None``.

    >>> import cutecall
    >>> cutecall.cutlass_to_jax_layout_order((2, 1, 0))  # row-major
    (0, 1, 2)
    >>> cutecall.cutlass_to_jax_layout_order((0, 1, 2))  # column-major
    (2, 1, 0)
    """
    if layout is None:
        return None
    perm = _permutation(layout, "cutlass_to_jax_layout_order")
    return tuple(sorted(range(len(perm)), key=lambda d: -perm[d]))


def jax_to_cutlass_layout_order(layout: Sequence[int] | None):
    """JAX's major-to-minor dim order as a CuTe layout order (the inverse of
    :func:`cutlass_to_jax_layout_order`). ``None`` stays ``None``.

    >>> import cutecall
    >>> cutecall.jax_to_cutlass_layout_order((0, 1, 2))
    (2, 1, 0)
    """
    if layout is None:
        return None
    perm = _permutation(layout, "jax_to_cutlass_layout_order")
    ranks = [0] * len(perm)
    for position, d in enumerate(perm):
        ranks[d] = len(perm) - 1 - position
    return tuple(ranks)


# ---------------------------------------------------------------------------
# Arrays

def from_dlpack(array: Any, assumed_align: int = 256) -> Any:
    """A ``cute.Tensor`` view of a DLPack array (a ``jax.Array`` on the GPU,
    a torch tensor) for eager use outside ``cutlass_call``: the DSL's
    ``cute.runtime.from_dlpack`` with XLA's 256-byte alignment as default.
    Raises ImportError if the CuTe DSL is missing."""
    _dsl("from_dlpack")
    from cutlass.cute.runtime import from_dlpack as to_tensor
    return to_tensor(array, assumed_align=assumed_align)


class JaxArray:
    """NVIDIA's placeholder for an XLA buffer while compiling: it rebuilds a
    ``cute.Tensor`` from NVIDIA's ``{data, dims}`` FFI descriptor. cutecall
    passes tensors through its own ABI (``docs/abi.md``), so it has no such
    object: constructing one raises ``NotImplementedError``. Describe an
    operand with :class:`cutecall.TensorSpec` (``order`` is its ``layout``,
    ``assumed_align`` its ``ptr_assumed_align``)."""

    def __init__(self, dtype, shape, mem_space, assumed_align, order=None,
                 mode=None, static=False, divisibility=None):
        raise NotImplementedError(
            f"cutecall.JaxArray(dtype={dtype!r}, shape={tuple(shape)!r}): "
            "NVIDIA's JaxArray decodes NVIDIA's FFI buffer descriptor, which "
            "cutecall does not use; pass arrays to cutecall.cutlass_call and "
            "describe them with cutecall.TensorSpec(layout=order, mode=mode, "
            "static=static, divisibility=divisibility, "
            "ptr_assumed_align=assumed_align)")
