"""The public names of NVIDIA's ``cutlass.jax`` (nvidia-cutlass-dsl 4.8),
with the same meaning, on cutecall's machinery. A module that does
``import cutlass.jax as cjax`` can do ``import cutecall as cjax`` instead.

Here: availability, the compile cache, the FFI targets; the dtype,
layout and array names are in ``_nvidia_types``. Nothing here imports the
CuTe DSL at import time (``cutecall.testing`` does when an attribute is
read). Names
that cannot mean the same thing (``set_ffi_call_targets``, ``JaxArray``)
keep their signatures and raise ``NotImplementedError`` saying why.
``docs/migrate/cutlass_call.md`` lists every difference.
"""

from __future__ import annotations

import functools
import gc

import jax

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
