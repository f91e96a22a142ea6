"""Every public name of NVIDIA's ``cutlass.jax`` is importable from cutecall
and means the same thing there, mapped onto cutecall's machinery.

Where the DSL is installed, each name is compared with NVIDIA's own function
on the same inputs. Process-wide state (FFI registration) and the DSL being
absent are tested in fresh interpreters."""

import inspect
import itertools
import os
import re
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from shared import BLOCKER, ROOT, f32, like_first, run_python

# cutlass.jax.__all__ in nvidia-cutlass-dsl 4.8.1 (for machines without it),
# plus find_cute_dsl_runtime_library (public there, not in __all__).
NVIDIA_NAMES = [
    "CUTE_DSL_MIN_SUPPORTED_JAX_VERSION", "CUTE_DSL_JAX_MIN_SUPPORTED_PYTHON_VERSION",
    "cutlass_call", "jax_to_cutlass_dtype", "cutlass_to_jax_dtype",
    "jax_to_cutlass_layout_order", "cutlass_to_jax_layout_order", "from_dlpack",
    "JaxArray", "TensorSpec", "TensorMode", "release_compile_cache",
    "get_export_disabled_safety_checks", "is_ffi_registered", "register_ffi",
    "set_ffi_call_targets", "disable_automatic_ffi_registration",
    "get_cutlass_call_ffi_name", "get_cutlass_call_ffi_version", "is_available",
    "testing", "find_cute_dsl_runtime_library",
]


@pytest.fixture(scope="module")
def nv():
    """NVIDIA's cutlass.jax (skips where the DSL is not installed)."""
    return pytest.importorskip("cutlass.jax")


# ---------------------------------------------------------------------------
# Importable, exported, same call signatures

def test_every_nvidia_name_is_importable_and_exported():
    for name in NVIDIA_NAMES:
        exec(f"from cutecall import {name}", {})
        assert name in cutecall.__all__, name


def test_the_installed_nvidia_list_is_covered(nv):
    assert set(nv.__all__) <= set(NVIDIA_NAMES)
    assert set(nv.__all__) <= set(cutecall.__all__)


# Deliberate: cutecall checks alignment before every launch, so it assumes
# 16 bytes (what vectorized loads need) rather than XLA's 256 unchecked.
DIFFERENT_DEFAULTS = {("TensorSpec", "ptr_assumed_align"),
                      ("TensorMode", "ptr_assumed_align")}


def test_signatures_accept_nvidias_arguments(nv):
    for name in NVIDIA_NAMES:
        ours, theirs = getattr(cutecall, name), getattr(nv, name)
        if not callable(theirs) or inspect.ismodule(theirs):
            continue
        mine = inspect.signature(ours).parameters
        kinds = {p.kind for p in mine.values()}
        for p in inspect.signature(theirs).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                assert p.kind in kinds, f"{name}: no {p}"
                continue
            assert p.name in mine, f"{name}: no parameter {p.name}"
            assert mine[p.name].kind == p.kind, f"{name}: {p.name} kind"
            if p.default is not p.empty and (name, p.name) not in DIFFERENT_DEFAULTS:
                assert mine[p.name].default == p.default, f"{name}: {p.name}"


def test_import_cutecall_does_not_import_the_dsl():
    out = run_python(textwrap.dedent("""
        import sys, cutecall
        from cutecall import *
        import cutecall.testing
        print("dsl loaded:", any(m == "cutlass" or m.startswith("cutlass.")
                                 for m in sys.modules))
    """))
    assert "dsl loaded: False" in out


def test_names_without_the_dsl():
    """With the DSL unimportable, every name imports; the pure ones work;
    the DSL-backed ones raise ImportError naming themselves."""
    out = run_python(BLOCKER + textwrap.dedent(f"""
        import sys, cutecall
        from cutecall import *
        names = {NVIDIA_NAMES!r}
        print("missing", [n for n in names if not hasattr(cutecall, n)])
        print("order", cutecall.cutlass_to_jax_layout_order((0, 1, 2)))
        print("checks", len(cutecall.get_export_disabled_safety_checks()))
        print("target", cutecall.get_cutlass_call_ffi_name(False))
        cutecall.release_compile_cache()
        for call in (lambda: cutecall.jax_to_cutlass_dtype("float32"),
                     lambda: cutecall.cutlass_to_jax_dtype(None),
                     lambda: cutecall.from_dlpack(None),
                     lambda: cutecall.testing.create_tensor):
            try:
                call()
            except ImportError as e:
                print("ImportError:", str(e).split(",")[0])
        print("dsl loaded:", "cutlass" in sys.modules)
    """))
    assert "missing []" in out
    assert "order (2, 1, 0)" in out and "checks 2" in out
    assert "target cutecall_call_no_graph_v1" in out
    for what in ("jax_to_cutlass_dtype", "cutlass_to_jax_dtype", "from_dlpack"):
        assert f"ImportError: cutecall.{what} needs the CuTe DSL" in out
    assert "ImportError: cutecall.testing forwards to cutlass.jax.testing" in out
    assert "dsl loaded: False" in out


# ---------------------------------------------------------------------------
# Versions and availability

def test_version_floors_are_cutecalls_own():
    pyproject = os.path.join(ROOT, "pyproject.toml")
    text = open(pyproject).read()
    jax_floor = re.search(r'"jax>=([\d.]+)', text).group(1)
    python_floor = re.search(r'requires-python = ">=([\d.]+)"', text).group(1)
    assert cutecall.CUTE_DSL_MIN_SUPPORTED_JAX_VERSION == tuple(
        int(v) for v in jax_floor.split("."))
    assert cutecall.CUTE_DSL_JAX_MIN_SUPPORTED_PYTHON_VERSION == tuple(
        int(v) for v in python_floor.split("."))


def test_is_available(monkeypatch, nv):
    assert cutecall.is_available() is True and nv.is_available() is True
    monkeypatch.setattr(jax.version, "__version_info__", (0, 5, 0))
    cutecall.is_available.cache_clear()
    try:
        assert cutecall.is_available() is False
    finally:
        monkeypatch.undo()
        cutecall.is_available.cache_clear()
    assert cutecall.is_available() is True


# ---------------------------------------------------------------------------
# dtypes: NVIDIA's table, both directions

ALL_DTYPES = ["bool", "int4", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "uint64", "bfloat16", "float16", "float32",
              "float64", "float8_e8m0fnu", "float8_e5m2", "float8_e4m3",
              "float8_e4m3fn", "float8_e4m3b11fnuz", "float4_e2m1fn"]


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_dtype_round_trip_agrees_with_nvidia(name, nv):
    dtype = jnp.dtype(name)
    ours = cutecall.jax_to_cutlass_dtype(dtype)
    assert ours is nv.jax_to_cutlass_dtype(dtype)
    assert cutecall.jax_to_cutlass_dtype(name) is ours  # any jnp.dtype input
    back = cutecall.cutlass_to_jax_dtype(ours)
    assert back == dtype and back == nv.cutlass_to_jax_dtype(ours)


def test_dtype_tables_are_nvidias(nv):
    from cutlass.jax import types

    assert {d.name for d in types.JAX_DTYPE_TO_CUTLASS_DTYPE} == set(ALL_DTYPES)


@pytest.mark.parametrize("dtype", [jnp.complex64, jnp.float8_e5m2fnuz, "uint4"])
def test_jax_dtype_without_cutlass_type(dtype, nv):
    with pytest.raises(ValueError, match=f"dtype={jnp.dtype(dtype).name} has no"):
        cutecall.jax_to_cutlass_dtype(dtype)
    with pytest.raises(ValueError):
        nv.jax_to_cutlass_dtype(dtype)


def test_cutlass_type_without_jax_dtype(nv):
    import cutlass

    for bad in (cutlass.Float6E2M3FN, cutlass.TFloat32, "float32", [1]):
        with pytest.raises(ValueError, match="has no JAX equivalent"):
            cutecall.cutlass_to_jax_dtype(bad)
    with pytest.raises(ValueError):
        nv.cutlass_to_jax_dtype(cutlass.Float6E2M3FN)


# ---------------------------------------------------------------------------
# Layout orders

PERMUTATIONS = [p for n in range(1, 5) for p in itertools.permutations(range(n))]


@pytest.mark.parametrize("perm", PERMUTATIONS, ids=str)
def test_layout_orders_agree_with_nvidia(perm, nv):
    to_jax = cutecall.cutlass_to_jax_layout_order(perm)
    to_cute = cutecall.jax_to_cutlass_layout_order(perm)
    assert to_jax == tuple(nv.cutlass_to_jax_layout_order(perm))
    assert to_cute == tuple(nv.jax_to_cutlass_layout_order(perm))
    assert cutecall.jax_to_cutlass_layout_order(to_jax) == perm
    assert cutecall.cutlass_to_jax_layout_order(to_cute) == perm


def test_layout_order_meaning():
    # row-major (2,1,0) is JAX's default (0,1,2); column-major the reverse
    assert cutecall.cutlass_to_jax_layout_order((2, 1, 0)) == (0, 1, 2)
    assert cutecall.cutlass_to_jax_layout_order([0, 1, 2]) == (2, 1, 0)
    assert cutecall.cutlass_to_jax_layout_order(np.array([1, 0])) == (0, 1)
    # JAX lists dims major to minor: dim 2 outermost gets CuTe rank 2
    assert cutecall.jax_to_cutlass_layout_order((2, 0, 1)) == (1, 0, 2)
    assert cutecall.cutlass_to_jax_layout_order(None) is None
    assert cutecall.jax_to_cutlass_layout_order(None) is None


@pytest.mark.parametrize("bad", [(0, 0), (1, 2), (0.0, 1), "ab"])
def test_layout_order_rejects_non_permutations(bad):
    for f in (cutecall.cutlass_to_jax_layout_order,
              cutecall.jax_to_cutlass_layout_order):
        with pytest.raises(ValueError, match=rf"layout={re.escape(repr(bad))} "
                           "must be a permutation"):
            f(bad)


# ---------------------------------------------------------------------------
# TensorSpec / TensorMode, JaxArray, from_dlpack, testing

def test_tensor_mode_is_tensor_spec():
    assert cutecall.TensorMode is cutecall.TensorSpec
    spec = cutecall.TensorMode(mode=(1, 0))
    assert spec == cutecall.TensorSpec(mode=(1, 0))


def test_jax_array_cannot_be_built_and_says_why(nv):
    args = (jnp.float32, (4, 8), None, 256)
    with pytest.raises(NotImplementedError,
                       match=r"JaxArray\(dtype=.*shape=\(4, 8\)\).*TensorSpec"):
        cutecall.JaxArray(*args, order=(1, 0))
    assert not isinstance(object(), cutecall.JaxArray)


def test_from_dlpack_matches_nvidia(nv):
    x = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
    ours, theirs = cutecall.from_dlpack(x), nv.from_dlpack(x)
    assert str(ours) == str(theirs)
    assert ours.element_type is theirs.element_type
    assert ours.shape == (3, 4) and ours.stride == (4, 1)
    assert getattr(ours, "_assumed_align", 256) == 256
    half = cutecall.from_dlpack(np.ones((2, 8), np.float16), assumed_align=2)
    assert getattr(half, "_assumed_align", 2) == 2


def test_testing_forwards_to_nvidia(nv):
    import cutecall.testing as testing
    from cutlass.jax import testing as theirs

    assert testing.create_tensor is theirs.create_tensor
    assert testing.gemm_a_mode("m") == theirs.gemm_a_mode("m")
    x = testing.create_tensor((4, 8), jnp.bfloat16, jax.random.key(0))
    assert x.shape == (4, 8) and x.dtype == jnp.bfloat16
    assert "create_tensor" in dir(testing)
    with pytest.raises(AttributeError, match="has none either"):
        testing.no_such_helper


# ---------------------------------------------------------------------------
# Compile cache

def test_release_compile_cache_drops_kernels_and_keeps_the_store(nv, single_accelerator):
    # single_accelerator: ejkernel's contract refuses cute_call outside
    # shard_map where several GPUs are visible; this test is about the cache.
    from cutecall import ejkernel
    from cutecall.compat import _ejkernel_cute_call
    from cutecall.examples import kernels

    def lower():  # a fresh call object: no trace cache of its own
        call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first)
        call.lower(f32(4096), f32(4096))

    lower()
    ejkernel.cute_call(jnp.ones(2), call=lambda x: x, out_shape=f32(2), name="r")
    assert cutecall.compile_stats()["entries"] >= 1 and _ejkernel_cute_call._NAMED_CALLS.entries
    cutecall.release_compile_cache()
    assert cutecall.compile_stats()["entries"] == 0
    assert not _ejkernel_cute_call._NAMED_CALLS.entries
    before = cutecall.compile_stats()
    lower()
    after = cutecall.compile_stats()
    assert after["entries"] == 1
    assert after["compiles"] == before["compiles"]          # not recompiled:
    assert after["disk_hits"] == before["disk_hits"] + 1    # the store kept it


# ---------------------------------------------------------------------------
# FFI: targets, export checks, registration

def test_ffi_name_and_version_are_the_lowered_targets(nv):
    from cutecall.examples import kernels

    assert cutecall.get_cutlass_call_ffi_version() == 1
    for graph in (True, False):
        name = cutecall.get_cutlass_call_ffi_name(graph, 1)
        assert name == cutecall.get_cutlass_call_ffi_name(allow_cuda_graph=graph)
        call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first,
                                     allow_cuda_graph=graph)
        text = call.lower(f32(256), f32(256)).as_text()
        assert f"stablehlo.custom_call @{name}(" in text
    with pytest.raises(ValueError, match=r"version=2: cutecall's FFI targets "
                       "implement version 1"):
        cutecall.get_cutlass_call_ffi_name(True, 2)
    with pytest.raises(ValueError, match="version=2"):
        cutecall.register_ffi(2)


def test_export_checks_make_jax_export_serialize(nv):
    pytest.importorskip("flatbuffers", reason="jax.export serialization needs it")
    from cutecall.examples import kernels

    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first)
    n, = jax.export.symbolic_shape("n")
    f = jax.jit(lambda a, b: jax.nn.sigmoid(add(a, b)))
    with pytest.raises(ValueError, match="cutecall_call_v1"):
        jax.export.export(f, platforms=["cuda"])(f32(n), f32(n))
    checks = cutecall.get_export_disabled_safety_checks()
    assert isinstance(checks, tuple) and all(
        isinstance(c, jax.export.DisabledSafetyCheck) for c in checks)
    assert {str(c) for c in checks} == {str(c) for c in cutecall.jax_export_checks()}
    exp = jax.export.export(f, platforms=["cuda"], disabled_checks=checks)(
        f32(n), f32(n))
    back = jax.export.deserialize(exp.serialize())
    assert str(back.in_avals[0]) == "float32[n]"
    assert "@cutecall_call_v1(" in back.mlir_module()


def test_registration_is_automatic_by_default():
    out = run_python(textwrap.dedent("""
        import cutecall
        from cutecall.examples import kernels
        print("before", cutecall.is_ffi_registered())
        cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)
        print("after", cutecall.is_ffi_registered(),
              cutecall.is_ffi_registered(1),
              cutecall.is_ffi_registered(name="cutecall_call_no_graph_v1"),
              cutecall.is_ffi_registered(name="cutecall_call_state_v1"),
              cutecall.is_ffi_registered(2),
              cutecall.is_ffi_registered(name="CuteDSLRT_NvJaxCutlassCall_v2"))
    """))
    assert "before False" in out
    assert "after True True True True False False" in out


def test_disable_automatic_registration_leaves_it_to_register_ffi():
    out = run_python(textwrap.dedent("""
        import cutecall
        from cutecall.examples import kernels
        cutecall.disable_automatic_ffi_registration()
        cutecall.disable_automatic_ffi_registration()  # idempotent
        cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)
        print("after call", cutecall.is_ffi_registered())
        cutecall.register_ffi()
        print("after register_ffi", cutecall.is_ffi_registered(),
              cutecall.is_ffi_registered(name="cutecall_call_v1"))
        try:
            cutecall.is_ffi_registered(1, name="cutecall_call_v1")
        except ValueError as e:
            print("ValueError:", e)
    """))
    assert "after call False" in out
    assert "after register_ffi True True" in out
    assert "ValueError: cutecall.is_ffi_registered: 'version' and 'name' cannot" in out


def test_set_ffi_call_targets_is_refused_with_the_reason(nv):
    with pytest.raises(NotImplementedError, match=r"default_call_target='my_target'.*"
                       r"cutecall_call_v1, cutecall_call_no_graph_v1.*ABI"):
        cutecall.set_ffi_call_targets("my_target")
    with pytest.raises(NotImplementedError, match="no_cuda_graph_call_target='b'"):
        cutecall.set_ffi_call_targets("a", no_cuda_graph_call_target="b")


def test_find_runtime_library_agrees_with_nvidia(nv):
    ours = cutecall.find_cute_dsl_runtime_library()
    theirs = nv.find_cute_dsl_runtime_library()
    assert ours and os.path.isfile(ours)
    assert os.path.basename(ours) == "libcute_dsl_runtime.so"
    if theirs and not os.environ.get("CUTECALL_DSL_RUNTIME"):
        assert os.path.realpath(ours) == os.path.realpath(theirs)


def test_docstring_examples_run(nv):
    import doctest

    from cutecall.compat import _nvidia_names, _nvidia_types

    results = [doctest.testmod(m) for m in (_nvidia_names, _nvidia_types)]
    assert sum(r.attempted for r in results) >= 10
    assert [r.failed for r in results] == [0, 0]
