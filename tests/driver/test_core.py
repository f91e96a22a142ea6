"""The nanobind module: digests, runtime discovery, registration."""

import hashlib
import os
import re

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
    from cutecall.jax import _targets
    _targets.ensure_registered()
    _targets.ensure_registered()
    stages = _core.handlers()[_core.TARGET]
    # No prepare stage: XLA would call it on every execution (graph replays
    # included); the module loads at instantiate.
    assert set(stages) == {"instantiate", "execute"}


def test_check_object_rejects_non_elf_and_missing_function():
    with pytest.raises(ValueError, match="not an ELF"):
        _core.check_object(b"hello", "cc_x")
    from cutecall.examples import kernels
    import jax, jax.numpy as jnp
    add = cutecall.cutlass_call(
        kernels.vector_add,
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype))
    k = cutecall.compile(add, jax.ShapeDtypeStruct((8,), jnp.float32),
                         jax.ShapeDtypeStruct((8,), jnp.float32)).kernel
    _core.check_object(k.module, k.function)
    with pytest.raises(RuntimeError, match="no symbol 'other_version'"):
        _core.check_object(k.module, "other")


def test_the_codes_shared_with_cpp_are_pinned():
    """Compiled artifacts, bundles and the torch launcher carry these codes:
    they are defined once, in C++ (abi.h, kernel_entry.h), and never change
    under the same plan version."""
    assert _core.PLAN_VERSION == 3
    assert _core.SCALAR_TYPES == ("Boolean", "Int8", "Int16", "Int32", "Int64",
                                  "Uint8", "Uint16", "Uint32", "Uint64",
                                  "Float32", "Float64")
    assert [int(getattr(_core.ScalarType, n)) for n in _core.SCALAR_TYPES] == \
        list(range(11))
    assert {k.name: int(k) for k in _core.UseKind} == {
        "TENSOR": 0, "SCALAR": 1, "IGNORE": 2, "OUTPUT": 3, "CONST": 4}
    from cutecall._driver import scalars
    assert scalars.SCALAR_TYPES == _core.SCALAR_TYPES


def test_a_kernel_entry_is_typed_and_validated():
    from cutecall._driver.plan import decode_plan
    plan = [3, 1, 0, 1, 1, 0, 0, 1, 4, 16, 0, 0, 1, 0, 4, -1, 0, 0]
    e = _core.KernelEntry(module=b"x", sha256="ab" * 32, function="cc_f",
                          kernel="k", plan=plan, operand_names="a",
                          uses=[_core.ArgUse(_core.UseKind.TENSOR, 0),
                                _core.ArgUse(_core.UseKind.SCALAR, 0,
                                             _core.ScalarType.Float32)])
    assert (e.kernel, e.function, e.num_slots, e.num_scalars) == ("k", "cc_f", 3, 1)
    assert [(u.kind, u.index, u.scalar_type) for u in e.uses] == [
        (_core.UseKind.TENSOR, 0, _core.ScalarType.Boolean),
        (_core.UseKind.SCALAR, 0, _core.ScalarType.Float32)]
    assert decode_plan(e.plan)[0]["dynamic"] == [(0, 4, -1)]
    with pytest.raises(ValueError, match="kernel 'bad'.*version 9"):
        _core.KernelEntry(module=b"x", sha256="", function="f", kernel="bad",
                          plan=[9, 0, 0, 0, 0])
    with pytest.raises(TypeError):
        _core.KernelEntry(b"x", "", "f", "k", plan)  # fields by name only


def test_device_arch_is_none_without_a_driver_or_names_the_gpu():
    arch = _core.device_arch(0)
    assert arch is None or re.fullmatch(r"sm_\d+a?", arch)
    assert _core.arch_runs_on("sm_90a", "sm_90") and \
        not _core.arch_runs_on("sm_90a", "sm_100")
