"""``cutlass.Constexpr`` parameters take the call's positional values where
their authors pass them (``binding.bind``), objects and callables included,
and a configuration object the compile fills in keeps one key
(``fingerprint.value_fingerprint``):

* after the stream: ``rms_like(x, w, b, out, rows, D, eps, stream,
  num_blocks)`` called ``(x, w, b, Int32(rows), Int32(D), Float32(eps), 4)``;
* first, with a lambda last: ``bmm(gemm_op, a, b, c, stream, epilogue)``
  called ``(gemm_op, a, b, epilogue)``;
* between tensors: ``mix(x, mode, y, out, stream)`` called ``(x, "add", y)``.

A GEMM object bound at construction (keywords) or passed positionally
compiles once for shapes A, B (one divisibility class) and A again. CPU:
lowered for the cuda platform (real sm_90a compiles); the GPU test checks
the numbers."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutlass

import cutecall
from cutecall._driver import fingerprint

import constexpr_kernels as ck


def s(n=1000):
    return jax.ShapeDtypeStruct((n,), jnp.float32)


def operands(lowered) -> str:
    return re.search(r'operands = "([^"]*)"', lowered.as_text()).group(1)


def first_like(x, *rest):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def second_like(g, a, *rest):
    return jax.ShapeDtypeStruct(a.shape, a.dtype)


def rms_args(n=1000, blocks=4):
    return (s(n), s(n), s(n), cutlass.Int32(n), cutlass.Int32(1), cutlass.Float32(1e-6),
            blocks)


def test_a_constexpr_after_the_stream_takes_its_positional_value(compiles):
    call = cutecall.cutlass_call(ck.rms_like, output_shape_dtype=first_like)
    assert operands(call.lower(*rms_args())) == "x,w,b,out"
    assert compiles() == 1
    call.lower(*rms_args(blocks=8))  # compiled in: another kernel
    call.lower(*rms_args(n=2000))    # runtime: the first one
    assert compiles() == 2


def test_an_object_first_and_a_lambda_last_compile_once_for_shapes_a_b_a(compiles):
    gemm, epilogue = ck.ScaledMul(2.0), (lambda v: v * 3.0)
    call = cutecall.cutlass_call(ck.bmm, output_shape_dtype=second_like)
    for n in (1000, 2000, 1000):
        assert operands(call.lower(gemm, s(n), s(n), epilogue)) == "a,b,c"
    assert compiles() == 1


def test_a_constexpr_between_tensors(compiles):
    call = cutecall.cutlass_call(ck.mix, output_shape_dtype=first_like)
    assert operands(call.lower(s(), "add", s())) == "x,y,out"
    call.lower(s(), "mul", s())
    assert compiles() == 2


def test_an_object_bound_at_construction_keeps_its_key(compiles):
    gemm = ck.ScaledMul(2.0)
    call = cutecall.cutlass_call(ck.bmm, output_shape_dtype=lambda a, b: a,
                                 gemm_op=gemm, epilogue=lambda v: v + 1.0)
    for n in (1000, 2000, 1000):  # the compile fills gemm's attributes in
        assert operands(call.lower(s(n), s(n))) == "a,b,c"
    assert compiles() == 1
    assert {"a_dtype", "grid"} <= set(vars(gemm))


def test_a_value_keeps_its_first_fingerprint_after_a_compile_fills_it():
    gemm = ck.ScaledMul(2.0)
    first = fingerprint.value_fingerprint(gemm, "gemm_op")
    gemm.grid = "filled by a trace"
    fingerprint.remember_compiled_state(gemm)
    assert fingerprint.value_fingerprint(gemm, "gemm_op") == first
    gemm.factor = 3.0  # its configuration changed: another kernel
    assert fingerprint.value_fingerprint(gemm, "gemm_op") != first


@pytest.mark.gpu
def test_gpu_positional_constexprs_compute():
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(1000).astype(np.float32) for _ in range(3))
    call = cutecall.cutlass_call(ck.rms_like, output_shape_dtype=first_like)
    out = call(*map(jnp.asarray, (x, w, b)), cutlass.Int32(1000), cutlass.Int32(1),
               cutlass.Float32(0.5), 4)
    # float32 on the GPU (fused multiply-adds) against NumPy: a few ulps apart
    np.testing.assert_allclose(np.asarray(out), x * w + b + 0.5, rtol=1e-5)
    bmm = cutecall.cutlass_call(ck.bmm, output_shape_dtype=second_like)
    c = bmm(ck.ScaledMul(2.0), jnp.asarray(x), jnp.asarray(w), lambda v: v * 3.0)
    np.testing.assert_allclose(np.asarray(c), x * w * 6.0, rtol=1e-5)
