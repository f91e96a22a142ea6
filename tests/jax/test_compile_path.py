"""``cutecall.compile`` goes through ``CutlassCall.trace`` (public), and
what it cannot learn it says: errors of cutecall's own code surface, and an
``output_shape_dtype`` that cannot take symbolic dims is logged, not hidden.
``CutlassCall`` takes its options keyword-only."""

import logging

import jax
import jax.numpy as jnp
import pytest

import cutecall
from cutecall.examples import kernels, signatures
from cutecall.jax import TracedCall


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def test_trace_is_public_and_names_the_runtime_scalars():
    call = cutecall.cutlass_call(signatures.axpby_stream_last,
                                 output_shape_dtype=lambda x, y: x)
    traced = call.trace(f32(64), f32(64), alpha=2.0, beta=0.5)
    assert isinstance(traced, TracedCall)
    assert traced.scalars == (("alpha", "Float32"), ("beta", "Float32"))
    assert "cutecall_call" in str(traced.jaxpr)
    assert "@cutecall_call_v1(" in traced.lower().as_text()
    spec = cutecall.compile(call, f32(64), f32(64), alpha=2.0, beta=0.5)
    assert spec.scalars == traced.scalars
    assert spec.contract.outputs == (("float32", ((0, 0),)),)


def test_a_shape_function_that_cannot_take_symbols_is_logged(caplog):
    def fixed_by_value(a, b):  # reads a dim as a Python int
        return jax.ShapeDtypeStruct((int(a.shape[0]),), a.dtype)

    with caplog.at_level(logging.INFO, logger="cutecall"):
        spec = cutecall.compile(kernels.vector_add, f32(8), f32(8),
                                output_shape_dtype=fixed_by_value)
    assert spec.contract.outputs == (("float32", None),)
    assert "output_shape_dtype is not a rule over input dims" in caplog.text
    with pytest.raises(TypeError, match="records no shape for output 0"):
        spec(jnp.ones(8), jnp.ones(8))


def test_other_errors_of_the_shape_function_surface():
    def broken_on_symbols(a, b):
        if not isinstance(a.shape[0], int):
            raise RuntimeError("my shape function broke")
        return a

    with pytest.raises(RuntimeError, match="my shape function broke"):
        cutecall.compile(kernels.vector_add, f32(8), f32(8),
                         output_shape_dtype=broken_on_symbols)


def test_cutlass_call_options_are_keyword_only():
    with pytest.raises(TypeError, match="positional"):
        cutecall.CutlassCall(kernels.vector_add, f32(8))
    call = cutecall.CutlassCall(kernels.vector_add, output_shape_dtype=f32(8),
                                name="kw_only")
    assert call.name == "kw_only" and call.operand_order == "inputs_first"
