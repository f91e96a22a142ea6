"""The public names of NVIDIA's ``cutlass.jax`` (nvidia-cutlass-dsl 4.8),
with the same meaning, on cutecall's machinery. A module that does
``import cutlass.jax as cjax`` can do ``import cutecall as cjax`` instead.

Nothing here imports the CuTe DSL at import time: the dtype helpers and
``from_dlpack`` import it when called (``ImportError`` naming the function
when it is missing), ``cutecall.testing`` when an attribute is read. Names
that cannot mean the same thing (``set_ffi_call_targets``, ``JaxArray``)
keep their signatures and raise ``NotImplementedError`` saying why.
``docs/migrate/cutlass_call.md`` lists every difference.
"""

from __future__ import annotations

import functools
import gc
import operator
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from .._driver import dsl
from .._driver.store import memory as _compile
from .._driver import runtime as _runtime
from ..jax import _targets
from ..jax import _contract
from .._driver.tensor_spec import TensorSpec

# cutecall's own floors (pyproject.toml: jax>=0.8.1, requires-python>=3.10).
CUTE_DSL_MIN_SUPPORTED_JAX_VERSION = (0, 8, 1)
CUTE_DSL_JAX_MIN_SUPPORTED_PYTHON_VERSION = (3, 10)

# NVIDIA's legacy name for TensorSpec.
TensorMode = TensorSpec


@functools.cache
def is_available() -> bool:
    """Whether cutecall's JAX integration can compile kernels here: JAX is
    at least ``CUTE_DSL_MIN_SUPPORTED_JAX_VERSION`` and the CuTe DSL
    (nvidia-cutlass-dsl) is installed. Imports neither the DSL nor anything
    new. Loading bundles (``cutecall.load_bundle``) needs only JAX.

    >>> import cutecall
    >>> cutecall.is_available()
    True
    """
    version = getattr(jax.version, "__version_info__", (0,))
    return (tuple(version) >= CUTE_DSL_MIN_SUPPORTED_JAX_VERSION
            and dsl.dsl_version() is not None)


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


def release_compile_cache() -> None:
    """Drops cutecall's in-process compiled kernels (``cutecall.clear_cache``),
    the ``cute_call`` named call cache and the DSL's in-memory JIT cache,
    then collects garbage. The on-disk artifact store is kept (``cutecall
    cache clear`` empties it); calls that are still referenced keep the
    kernels they traced until they are dropped."""
    from ._ejkernel_cute_call import _NAMED_CALLS

    _compile.clear_cache()
    _NAMED_CALLS.clear()
    dsl.clear_dsl_jit_cache()
    gc.collect()


# ---------------------------------------------------------------------------
# FFI targets

def get_export_disabled_safety_checks() -> tuple:
    """The ``disabled_checks`` that ``jax.export`` needs for cutecall's FFI
    targets (``cutecall.jax_export_checks()`` as a tuple)::

        exp = jax.export.export(jax.jit(f), platforms=["cuda"],
            disabled_checks=cutecall.get_export_disabled_safety_checks())

    A program that also calls NVIDIA's ``cutlass_call`` adds NVIDIA's list.
    """
    return tuple(_contract.jax_export_checks())


def find_cute_dsl_runtime_library() -> str | None:
    """Path of ``libcute_dsl_runtime.so`` (``$CUTECALL_DSL_RUNTIME``, else the
    nvidia-cutlass-dsl-libs-cu13 or -cu12 wheel), found without importing
    the DSL; None if absent."""
    return _runtime.find_runtime_library()


def get_cutlass_call_ffi_version() -> int:
    """The version of cutecall's call ABI (the ``_vN`` of its targets). It
    does not depend on the JAX version, as NVIDIA's 1-or-2 does."""
    return int(_targets.TARGET.rsplit("_v", 1)[1])


def _check_version(version, what: str) -> int:
    supported = get_cutlass_call_ffi_version()
    if version is None:
        return supported
    if version != supported:
        raise ValueError(f"cutecall.{what}: version={version!r}: cutecall's FFI "
                         f"targets implement version {supported} of cutecall's "
                         "call ABI (NVIDIA's versions 1 and 2 are another ABI)")
    return supported


def get_cutlass_call_ffi_name(allow_cuda_graph: bool = True,
                              version: int | None = None) -> str:
    """The FFI target cutecall's calls lower to: ``cutecall_call_v1``, or
    ``cutecall_call_no_graph_v1`` when ``allow_cuda_graph`` is False.
    ``version`` (default: the current one) must be that version."""
    _check_version(version, "get_cutlass_call_ffi_name")
    return _targets.TARGET if allow_cuda_graph else _targets.TARGET_NO_GRAPH


def register_ffi(version: int | None = None) -> None:
    """Registers cutecall's FFI targets and state type with JAX now (as
    ``cutecall.register()``; idempotent, also after
    :func:`disable_automatic_ffi_registration`)."""
    _check_version(version, "register_ffi")
    _contract.register()


def is_ffi_registered(version: int | None = None, *,
                      name: str | None = None) -> bool:
    """Whether cutecall registered its FFI version (default: the current
    one) or, with ``name``, that target or type name, in this process."""
    if version is not None and name is not None:
        raise ValueError("cutecall.is_ffi_registered: 'version' and 'name' "
                         f"cannot both be specified (got {version!r}, {name!r})")
    if name is not None:
        return _targets.is_registered() and name in _targets.NAMES
    if version is None:
        version = get_cutlass_call_ffi_version()
    return _targets.is_registered() and version == get_cutlass_call_ffi_version()


def disable_automatic_ffi_registration() -> None:
    """From now on, creating a ``cutlass_call`` (or loading a bundle) does not
    register cutecall's FFI targets; :func:`register_ffi` still does.
    Existing registrations stay. Process-wide and idempotent."""
    _targets.disable_automatic()


def set_ffi_call_targets(default_call_target: str,
                         no_cuda_graph_call_target: str | None = None) -> None:
    """Not supported: raises ``NotImplementedError``. NVIDIA's hook routes
    calls to targets implementing NVIDIA's CuTeDSL call ABI; cutecall's
    custom calls carry cutecall's object and launch plan, which only
    cutecall's targets run. Leaving the request unhonoured silently would
    bypass the caller's handler, so it is refused."""
    raise NotImplementedError(
        f"cutecall.set_ffi_call_targets(default_call_target="
        f"{default_call_target!r}, no_cuda_graph_call_target="
        f"{no_cuda_graph_call_target!r}): cutecall's calls run only through "
        f"its own targets ({_targets.TARGET}, {_targets.TARGET_NO_GRAPH}), "
        "whose ABI differs from NVIDIA's CuTeDSL call ABI; remove this call "
        "(allow_cuda_graph=False selects the no-CUDA-graph target)")
