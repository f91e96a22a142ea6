"""ejkernel's ``_cute_ffi.py`` (``build_cute_ffi_call``, its
primitive, stream-parameter detection, ``has_cute_ffi_support``), on
``cutecall.ejkernel``: no TVM-FFI, ``--enable-tvm-ffi`` accepted and
ignored, flat launcher convention with pytrees in and out, aliases,
static kwargs, the stream first or absent, no autodiff rule (vmap loops), and every
``Raises`` clause that still applies."""

import importlib.util
import inspect
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall._driver import runtime as _runtime
from cutecall.jax import _targets
from cutecall.compat import _ejkernel_ffi
from cutecall.ejkernel import build_cute_ffi_call, has_cute_ffi_support
from cutecall.examples import ejkernel_style as ejs
from cutecall.examples import kernels

from shared import f32, run_on_cpu_devices

pytestmark = pytest.mark.usefixtures("single_accelerator")


def i32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def custom_calls(lowered) -> list[str]:
    return [l for l in lowered.as_text().splitlines()
            if "stablehlo.custom_call @cutecall_call" in l]


def key_of(line: str) -> str:
    return line.split('key = "')[1].split('"')[0]


def scale_add_call(scale=2.0, spec=f32(8), **kw):
    return build_cute_ffi_call(ejs._build_scale_add_host_fns(scale)[1],
                               output_shape_dtype=spec, **kw)


# ---------------------------------------------------------------------------
# The primitive path without TVM-FFI

def test_lowers_to_cutecalls_own_target_without_tvm_ffi():
    call = scale_add_call(compile_options="--enable-tvm-ffi")
    [line] = custom_calls(call.lower(f32(8), f32(8)))
    assert "@cutecall_call_v1(" in line and "tvm" not in line
    if importlib.util.find_spec("jax_tvm_ffi") is None:
        assert has_cute_ffi_support()  # and it is not installed here


def test_enable_tvm_ffi_is_ignored_and_noted_once(monkeypatch, caplog):
    monkeypatch.setattr(_ejkernel_ffi, "_noted_tvm_ffi", False)
    seen = []
    real = _ejkernel_ffi.cutlass_call
    monkeypatch.setattr(_ejkernel_ffi, "cutlass_call",
                        lambda fn, **kw: seen.append(kw) or real(fn, **kw))
    caplog.set_level(logging.INFO, logger="cutecall.ejkernel")
    a = scale_add_call(compile_options="--enable-tvm-ffi")
    b = scale_add_call(compile_options="--enable-tvm-ffi --gpu-arch sm_80")
    c = scale_add_call(compile_options="enable-tvm-ffi=true,--gpu-arch=sm_90a")
    notes = [r for r in caplog.records if "--enable-tvm-ffi is ignored" in r.message]
    assert len(notes) == 1
    assert (a.options, b.options, c.options) == (None, "--gpu-arch sm_80",
                                                 "--gpu-arch=sm_90a")
    assert [kw["compile_options"] for kw in seen] == [None, "--gpu-arch sm_80",
                                                      "--gpu-arch=sm_90a"]


def test_ejkernel_modules_tvm_ffi_switch_is_neutralised(monkeypatch, compiles):
    """ejkernel modules set CUTE_DSL_ENABLE_TVM_FFI=1; when the DSL read it,
    every compile would target TVM-FFI (and need apache-tvm-ffi)."""
    from cutlass.cutlass_dsl.cutlass import CuTeDSL

    envar = CuTeDSL._get_dsl().envar  # the compile driver turns it off
    monkeypatch.setattr(envar, "enable_tvm_ffi", True)
    spec = jax.ShapeDtypeStruct((8,), jnp.float16)
    call = scale_add_call(1.5, spec, compile_options="--enable-tvm-ffi")
    assert custom_calls(call.lower(spec, spec))
    assert compiles() == 1  # a real compile ran with the switch on
    assert envar.enable_tvm_ffi is True  # and it is restored


def test_has_cute_ffi_support(monkeypatch):
    assert has_cute_ffi_support() is True
    with monkeypatch.context() as m:
        m.setattr(_ejkernel_ffi, "_dsl_import_error", lambda: "ImportError: no cutlass")
        assert has_cute_ffi_support() is False
    with monkeypatch.context() as m:
        m.setattr(_runtime, "find_runtime_library", lambda: None)
        assert has_cute_ffi_support() is False
    with monkeypatch.context() as m:
        def fail():
            raise RuntimeError("registration failed")
        m.setattr(_targets, "ensure_registered", fail)
        assert has_cute_ffi_support() is False
        with pytest.raises(RuntimeError, match="could not register its FFI targets"):
            scale_add_call()


# ---------------------------------------------------------------------------
# Calling convention: (stream?, *flat inputs, *flat outputs, **static_kwargs)

def test_inputs_are_flattened_and_none_dropped():
    call = build_cute_ffi_call(ejs._build_add_sub_host_fns(),
                               output_shape_dtype=(f32(8), f32(8)))
    a = custom_calls(call.lower(f32(8), f32(8)))
    b = custom_calls(call.lower((f32(8), [f32(8)])))
    c = custom_calls(call.lower(f32(8), None, f32(8)))
    assert len(a) == len(b) == len(c) == 1
    assert key_of(a[0]) == key_of(b[0]) == key_of(c[0])


def test_outputs_come_back_in_the_output_pytree():
    launcher = ejs._build_add_sub_host_fns()
    nested = build_cute_ffi_call(launcher, output_shape_dtype=(f32(8), [f32(8)]))
    got = jax.eval_shape(nested, f32(8), f32(8))
    assert isinstance(got, tuple) and isinstance(got[1], list)
    assert got[1][0].shape == (8,)
    named = build_cute_ffi_call(launcher, output_shape_dtype={"s": f32(8), "d": f32(8)})
    assert set(jax.eval_shape(named, f32(8), f32(8))) == {"s", "d"}


def test_static_kwargs_are_compile_time_constants():
    outs = f32(8, 4)
    key = lambda **kw: key_of(custom_calls(build_cute_ffi_call(
        kernels.scale_bias_act, output_shape_dtype=outs, **kw).lower(
            f32(8, 4), f32(4)))[0])
    assert key(alpha=2.0, relu=True) == key(alpha=2.0, relu=True)
    assert key(alpha=2.0, relu=True) != key(alpha=3.0, relu=True)


def test_static_kwargs_named_like_cutlass_call_options_reach_the_launcher(monkeypatch):
    seen = {}
    real = _ejkernel_ffi.cutlass_call

    def record(fn, **kw):
        seen.update(launcher=fn, kw=kw)
        return real(fn, **kw)

    monkeypatch.setattr(_ejkernel_ffi, "cutlass_call", record)
    got = []

    def launcher(stream, x, out, *, name, scale):
        got.append((stream, x, out, name, scale))

    build_cute_ffi_call(launcher, output_shape_dtype=f32(4), name="mine", scale=2)
    assert "name" not in seen["kw"] or seen["kw"]["name"] == "launcher"
    assert seen["kw"]["scale"] == 2 and seen["launcher"] is not launcher
    seen["launcher"]("S", "x", "out", scale=2)  # as cutecall calls it
    assert got == [("S", "x", "out", "mine", 2)]


def test_aliased_outputs_are_passed_as_their_input_buffer():
    got = []
    launch = _ejkernel_ffi._ejkernel_launcher(lambda *a, **k: got.append((a, k)), 0, 3,
                                   ((0, 3), (2, 4)), ())
    launch("S", "i0", "i1", "i2", "i3", "i4", "o1", k=1)  # outputs 0, 2 aliased
    assert got == [(("S", "i0", "i1", "i2", "i3", "i4", "i3", "o1", "i4"), {"k": 1})]
    launch = _ejkernel_ffi._ejkernel_launcher(lambda *a, **k: got.append(a), None, 1,
                                   ((0, 1),), ())
    launch("S", "i0", "i1")  # a launcher without a stream
    assert got[-1] == ("i0", "i1", "i1")


def test_aliases_lower_to_xla_aliases():
    upd = build_cute_ffi_call(ejs._build_update_rows_host_fns(),
                              output_shape_dtype=f32(16, 8),
                              input_output_aliases={2: 0})
    [line] = custom_calls(upd.lower(f32(4, 8), i32(4), f32(16, 8)))
    assert "output_operand_aliases" in line and "operand_index = 2" in line


@pytest.mark.parametrize("aliases, err, match", [
    ({0: 3}, ValueError, r"\{0: 3\}: there are only 1 outputs"),
    ({"a": 0}, TypeError, "must map flattened input indices"),
    ({0: -1}, TypeError, "must map flattened input indices"),
])
def test_alias_errors(aliases, err, match):
    with pytest.raises(err, match=match):
        build_cute_ffi_call(ejs._build_update_rows_host_fns(),
                            output_shape_dtype=f32(16, 8),
                            input_output_aliases=aliases)


def test_exported_from_cutecall_without_importing_the_dsl():
    results = run_on_cpu_devices("""
        import sys, cutecall
        from cutecall import ejkernel
        results["same"] = (cutecall.cute_call is ejkernel.cute_call and
                           cutecall.build_cute_ffi_call is ejkernel.build_cute_ffi_call
                           and cutecall.has_cute_ffi_support is
                           ejkernel.has_cute_ffi_support)
        results["dsl_imported"] = "cutlass" in sys.modules
        results["flag"] = ejkernel.CAN_USE_CUTE
    """, n=1)
    assert results == {"same": True, "dsl_imported": False, "flag": True}


def test_build_errors():
    with pytest.raises(TypeError, match="fn must be a @cute.jit launcher"):
        build_cute_ffi_call(42, output_shape_dtype=f32(4))
    with pytest.raises(TypeError, match="has no parameter 'bogus'"):
        build_cute_ffi_call(kernels.vector_add, output_shape_dtype=f32(4), bogus=1)
    with pytest.raises(ValueError, match="output_shape_dtype has no leaves"):
        build_cute_ffi_call(kernels.vector_add, output_shape_dtype=())


def test_output_leaf_without_shape_is_a_type_error():
    with pytest.raises(TypeError,
                       match=r"output_shape_dtype\[1\]\[0\] must have.*got int: 4"):
        build_cute_ffi_call(kernels.vector_add, output_shape_dtype=(f32(4), (4,)))


# ---------------------------------------------------------------------------
# Stream-parameter detection

def l_first(stream, a, out): ...
def l_absent(a, out): ...
def l_last(a, out, stream): ...
def l_varargs(*tensors): ...
def l_named_other(a, s: "cuda.bindings.driver.CUstream", out): ...
def l_tensor_named_stream(stream: "cute.Tensor", out): ...


@pytest.mark.parametrize("fn, want", [
    (l_first, 0), (l_absent, None), (l_last, 2), (l_varargs, 0),
    (l_named_other, 1), (l_tensor_named_stream, None), (print, 0),
    (ejs._build_scale_add_host_fns(1.0)[1], 0),
    (ejs._build_scale_add_host_fns(1.0)[0], None),
])
def test_stream_position(fn, want):
    assert _ejkernel_ffi._stream_position(fn) == want


def test_streamless_launcher_lowers():
    spec = f32(100)
    lowered = jax.jit(lambda x, y: ejs.scale_add_streamless(x, y, scale=2.0)).trace(
        spec, spec).lower(lowering_platforms=("cuda",))
    assert len(custom_calls(lowered)) == 1


# ---------------------------------------------------------------------------
# The primitive: no jvp / transpose / batching rules; CPU; dtypes; the DSL

def test_grad_raises_not_implemented_and_vmap_loops():
    # The seed raises NotImplementedError for both; cutecall keeps that for
    # grad (cutecall.DifferentiationError, with how to add a rule) and makes
    # vmap work: one launch per example, with a warning (docs/transforms.md).
    call = scale_add_call()
    with pytest.raises(NotImplementedError, match="Differentiation rule"):
        jax.eval_shape(jax.grad(lambda x, y: call(x, y).sum()), f32(8), f32(8))
    with pytest.warns(cutecall.VmapFallbackWarning, match="once per batch"):
        out = jax.eval_shape(jax.vmap(call), f32(3, 8), f32(3, 8))
    assert out.shape == (3, 8)


def test_unsupported_dtype_is_a_type_error():
    c64 = jax.ShapeDtypeStruct((8,), jnp.complex64)
    with pytest.raises(TypeError, match="complex64"):
        scale_add_call(spec=c64).lower(c64, c64)


def test_eager_call_without_a_gpu_says_so():
    if jax.default_backend() != "cpu":
        pytest.skip("only meaningful without a GPU")
    with pytest.raises(NotImplementedError, match="runs only on CUDA GPUs"):
        scale_add_call()(jnp.ones(8), jnp.ones(8))


def test_value_error_without_the_cute_dsl(monkeypatch):
    call = scale_add_call()
    monkeypatch.setattr(_ejkernel_ffi, "_dsl_import_error", lambda: "ImportError: no cutlass")
    with pytest.raises(ValueError, match="only available when the CuTe DSL"):
        call(jnp.ones(8), jnp.ones(8))


def test_one_compile_for_every_shape_and_rebuilt_closure(compiles):
    """ejkernel's compile cache holds `fn` itself, and its kernels make a new
    `fn` per call: every new closure recompiled. cutecall keys on content
    (and the divisibility class: these sizes are all multiples of 4)."""
    for n in (8, 100, 4100):
        scale_add_call(4.0, f32(n)).lower(f32(n), f32(n))
    assert compiles() <= 1


def test_build_signature_matches_ejkernel():
    params = inspect.signature(build_cute_ffi_call).parameters
    assert list(params) == ["fn", "output_shape_dtype", "input_output_aliases",
                            "compile_options", "static_kwargs"]
    assert all(params[p].kind == inspect.Parameter.KEYWORD_ONLY
               for p in ("output_shape_dtype", "input_output_aliases",
                         "compile_options"))


# ---------------------------------------------------------------------------
# GPU

def rand(seed, shape, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32).astype(dtype)


@pytest.mark.gpu
def test_gpu_update_rows_in_place():
    cache = rand(0, (64, 40))
    rows = rand(1, (5, 40))
    idx = jnp.array([3, 0, 63, 17, 40], jnp.int32)
    want = ejs.REFERENCES["update_rows"](cache, rows, idx)
    np.testing.assert_array_equal(ejs.update_rows(cache, rows, idx), want)
    donated = jax.jit(ejs.update_rows, donate_argnums=0)
    np.testing.assert_array_equal(donated(cache + 0, rows, idx), want)


@pytest.mark.gpu
def test_gpu_pytree_outputs():
    call = build_cute_ffi_call(ejs._build_add_sub_host_fns(),
                               output_shape_dtype=(f32(3000), [f32(3000)]))
    x, y = rand(2, (3000,)), rand(3, (3000,))
    s, (d,) = jax.jit(call)(x, [y])
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(d, x - y)


@pytest.mark.gpu
def test_gpu_streamless_launcher():
    x, y = rand(4, (70_001,)), rand(5, (70_001,))
    want = ejs.REFERENCES["scale_add"](x, y, scale=0.25)
    got = jax.jit(lambda a, b: ejs.scale_add_streamless(a, b, scale=0.25))(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_gpu_static_kwargs():
    x, bias = rand(6, (300, 257)), rand(7, (257,))
    call = build_cute_ffi_call(kernels.scale_bias_act, output_shape_dtype=f32(300, 257),
                               alpha=1.5, relu=True)
    want = kernels.REFERENCES["scale_bias_act"](np.asarray(x), np.asarray(bias),
                                                alpha=1.5, relu=True)
    np.testing.assert_allclose(call(x, bias), want, rtol=1e-6, atol=1e-6)
