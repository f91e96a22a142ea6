"""The documented behaviour of ejkernel's ``cute_call``, on
``cutecall.ejkernel``: its contract, every ``Raises`` clause, named scopes,
the ``device`` check and the multi-accelerator rule.

On CPU, pure-JAX callables stand in for kernels where the behaviour is
cute_call's own; real CuTe DSL kernels (``cutecall.examples.ejkernel_style``)
are compiled and lowered for the cuda platform. Multi-device placement runs
in a child process with forced CPU devices. ``gpu`` tests launch kernels."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall import ejkernel
from cutecall.compat import _ejkernel_cute_call, _ejkernel_ffi
from cutecall.ejkernel import cute_call
from shared import f32, lowered_text, run_on_cpu_devices

pytestmark = pytest.mark.usefixtures("single_accelerator")


def double(x):
    return x * 2


# ---------------------------------------------------------------------------
# The output contract: "unflattened to match the out or out_shape pytree"

def test_call_outputs_are_returned_for_one_out_shape():
    x = jnp.arange(6.0)
    y = cute_call(x, call=double, out_shape=f32(6))
    np.testing.assert_array_equal(y, np.arange(6.0) * 2)


def test_out_shape_sequence_gives_the_sequence():
    x = jnp.arange(4.0)
    got = cute_call(x, call=lambda x: (x + 1, x - 1), out_shape=[f32(4), f32(4)])
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_array_equal(got[0], np.arange(4.0) + 1)
    np.testing.assert_array_equal(got[1], np.arange(4.0) - 1)


def test_out_is_metadata_only():
    x = jnp.arange(4.0)
    out = {"y": jnp.zeros(4)}
    got = cute_call(x, call=lambda x: {"y": x + 10}, out=out)
    assert set(got) == {"y"}
    np.testing.assert_array_equal(got["y"], np.arange(4.0) + 10)
    np.testing.assert_array_equal(out["y"], np.zeros(4))  # not a destination


def test_under_jit_and_with_positional_pytrees():
    x, y = jnp.ones(3), jnp.full(3, 2.0)
    f = jax.jit(lambda x, y: cute_call((x, [y]), call=lambda t: t[0] + t[1][0],
                                       out_shape=f32(3)))
    np.testing.assert_array_equal(f(x, y), np.full(3, 3.0))


# ---------------------------------------------------------------------------
# name: "used for JAX named scopes and internal caching"

def test_name_is_the_named_scope():
    text = lowered_text(lambda x: cute_call(x, call=double, out_shape=f32(4),
                                            name="my_kernel"), f32(4))
    assert "/my_kernel/" in text
    text = lowered_text(lambda x: cute_call(x, call=double, out_shape=f32(4)),
                        f32(4))
    assert "/cute_call/" in text


def test_named_scope_wraps_a_real_kernel():
    from cutecall.examples import ejkernel_style as ejs

    text = lowered_text(lambda x, y: ejs.scale_add(x, y, scale=2.0),
                        f32(1000), f32(1000))
    call = [l for l in text.splitlines()
            if "stablehlo.custom_call @cutecall_call_v1" in l]
    assert len(call) == 1
    assert "/ejk_scale_add/" in text


# ---------------------------------------------------------------------------
# device: "Optional device index to validate input placement against"

def test_device_index_is_checked():
    x = jax.device_put(jnp.ones(3), jax.devices()[0])
    cute_call(x, call=double, out_shape=f32(3), device=0)
    with pytest.raises(ValueError, match=r"`device=7` is out of range"):
        cute_call(x, call=double, out_shape=f32(3), device=7)
    with pytest.raises(TypeError, match="`device` must be a device index"):
        cute_call(x, call=double, out_shape=f32(3), device="0")


# ---------------------------------------------------------------------------
# Raises: ValueError

def test_value_error_without_the_cute_dsl(monkeypatch):
    monkeypatch.setattr(_ejkernel_ffi, "_dsl_import_error",
                        lambda: "ModuleNotFoundError: No module named 'cutlass'")
    with pytest.raises(ValueError, match="only available when the CuTe DSL"):
        cute_call(jnp.ones(2), call=double, out_shape=f32(2))
    assert ejkernel.CAN_USE_CUTE is False


@pytest.mark.parametrize("kwargs, match", [
    (dict(out_shape=f32(2)), "Provide `call`"),
    (dict(call=double), "Provide either `out` or `out_shape`"),
    (dict(call=lambda x: None, out_shape=f32(2)), "expected `call` to return"),
], ids=["call-is-None", "no-contract", "call-returns-None"])
def test_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cute_call(jnp.ones(2), **kwargs)


def test_call_must_be_callable():
    with pytest.raises(TypeError, match="`call` must be callable"):
        cute_call(jnp.ones(2), call="kernel", out_shape=f32(2))


# ---------------------------------------------------------------------------
# Raises: AssertionError

def test_assertion_error_for_several_accelerators_outside_shard_map(monkeypatch):
    monkeypatch.setattr(_ejkernel_cute_call, "_accelerator_count", lambda: 2)
    with pytest.raises(AssertionError, match="must be invoked under `jax.shard_map`"):
        cute_call(jnp.ones(4), call=double, out_shape=f32(4))
    with pytest.raises(AssertionError, match="must be invoked under `jax.shard_map`"):
        jax.jit(lambda x: cute_call(x, call=double, out_shape=f32(4)))(jnp.ones(4))

    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    P = jax.sharding.PartitionSpec
    body = lambda x: cute_call(x, call=double, out_shape=f32(4))
    smap = jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    np.testing.assert_array_equal(smap(jnp.ones(4)), np.full(4, 2.0))
    np.testing.assert_array_equal(jax.jit(smap)(jnp.ones(4)), np.full(4, 2.0))


def test_assertion_error_for_arrays_on_several_devices():
    results = run_on_cpu_devices("""
        import jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        from cutecall.ejkernel import cute_call
        d0, d1 = jax.devices()
        spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        def attempt(name, *args, **kw):
            try:
                cute_call(*args, call=lambda *a: a[0] * 2, out_shape=spec, **kw)
                results[name] = "ok"
            except Exception as e:
                results[name] = [type(e).__name__, str(e)]
        mesh = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
        sharded = jax.device_put(jnp.ones(4), NamedSharding(mesh, P("x")))
        attempt("sharded", sharded)
        attempt("two_devices", jax.device_put(jnp.ones(4), d0),
                jax.device_put(jnp.ones(4), d1))
        attempt("same_device", jax.device_put(jnp.ones(4), d1),
                jax.device_put(jnp.ones(4), d1), device=1)
        attempt("wrong_device", jax.device_put(jnp.ones(4), d0), device=1)
    """)
    assert results["same_device"] == "ok"
    assert results["sharded"][0] == "AssertionError"
    assert "Argument 0 is sharded across 2 devices" in results["sharded"][1]
    assert results["two_devices"][0] == "AssertionError"
    assert "Argument 1 is on" in results["two_devices"][1]
    assert results["wrong_device"][0] == "AssertionError"
    assert "`device=1`" in results["wrong_device"][1]


# ---------------------------------------------------------------------------
# GPU: ejkernel-style kernels against JAX references

@pytest.mark.gpu
def test_gpu_scale_add_matches_reference():
    from cutecall.examples import ejkernel_style as ejs

    key = jax.random.key(0)
    x = jax.random.normal(key, (100_003,), jnp.float32)
    y = jax.random.normal(jax.random.fold_in(key, 1), (100_003,), jnp.float32)
    for scale in (2.0, -0.5):  # one name, two kernels
        want = ejs.REFERENCES["scale_add"](x, y, scale=scale)
        np.testing.assert_allclose(ejs.scale_add(x, y, scale=scale), want,
                                   rtol=1e-6, atol=1e-6)
        got = jax.jit(lambda a, b: ejs.scale_add(a, b, scale=scale))(x, y)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_gpu_add_sub_two_outputs():
    from cutecall.examples import ejkernel_style as ejs

    x = jnp.arange(5000, dtype=jnp.float32)
    y = jnp.full((5000,), 3.0, jnp.float32)
    s, d = jax.jit(ejs.add_sub)(x, y)
    ws, wd = ejs.REFERENCES["add_sub"](x, y)
    np.testing.assert_array_equal(s, ws)
    np.testing.assert_array_equal(d, wd)
