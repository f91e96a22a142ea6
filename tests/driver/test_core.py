"""The nanobind module: digests, runtime discovery, registration."""

import hashlib
import os

import pytest

import cutecall
from cutecall import _core
from cutecall._driver import runtime as _runtime


@pytest.mark.parametrize("data", [b"", b"abc", bytes(range(256)) * 33])
def test_sha256_matches_hashlib(data):
    assert _core.sha256(data) == hashlib.sha256(data).hexdigest()


def test_runtime_library_is_found_in_the_dsl_wheel():
    path = _runtime.find_runtime_library()
    assert path and os.path.basename(path) == "libcute_dsl_runtime.so"
    assert os.path.exists(path)


def test_env_override_wins(monkeypatch):
    monkeypatch.setenv("CUTECALL_DSL_RUNTIME", "/opt/x/libcute_dsl_runtime.so")
    assert _runtime.find_runtime_library() == "/opt/x/libcute_dsl_runtime.so"


def test_targets_are_versioned_and_registration_is_idempotent():
    assert _core.TARGET == "cutecall_call_v1"
    assert _core.TARGET_NO_GRAPH == "cutecall_call_no_graph_v1"
    _runtime.ensure_registered()
    _runtime.ensure_registered()
    stages = _core.handlers()[_core.TARGET]
    # No prepare stage: XLA would call it on every execution (graph replays
    # included); the module loads at instantiate.
    assert set(stages) == {"instantiate", "execute"}


def test_check_object_rejects_non_elf_and_missing_function():
    with pytest.raises(ValueError, match="not an ELF"):
        _core.check_object(b"hello", "cc_x")
    from cutecall._driver import compiler as _compile
    from cutecall.examples import kernels
    import jax, jax.numpy as jnp
    add = cutecall.cutlass_call(
        kernels.vector_add,
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype))
    add.lower(jax.ShapeDtypeStruct((8,), jnp.float32),
              jax.ShapeDtypeStruct((8,), jnp.float32))
    k = next(iter(_compile._cache.entries.values()))
    _core.check_object(k.module, k.function)
    with pytest.raises(RuntimeError, match="no symbol 'other_version'"):
        _core.check_object(k.module, "other")
