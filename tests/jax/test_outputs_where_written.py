"""cutlass_call binds ``output_shape_dtype``'s arrays to the parameters the
kernel writes, wherever they sit -- first, between the inputs, last, before
an optional input -- with no ``output_params``: the driver's output
placement stage (``_driver.outputs.stage``) reads the writes from the MLIR
a trace of the DSL makes, before anything compiles, and the call binds
once. CPU: the call is lowered for the cuda platform (real sm_90a
compiles); the lowered custom call names its operands in kernel order,
inputs then outputs. The GPU tests check the numbers."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall._driver import pipeline
from cutecall._driver.outputs import stage

import outputs_kernels as ok

f32, i32 = jnp.float32, jnp.int32
N = 1000


def s(dtype=f32, n=N):
    return jax.ShapeDtypeStruct((n,), dtype)


def operands(lowered) -> str:
    m = re.search(r'operands = "([^"]*)"', lowered.as_text())
    assert m, lowered.as_text()[:2000]
    return m.group(1)


def like_first(x, *rest):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def first_call():
    return cutecall.cutlass_call(ok.out_first, output_shape_dtype=like_first)


def between_call():
    return cutecall.cutlass_call(ok.out_between, output_shape_dtype=(s(), s()))


def loss_call():
    return cutecall.cutlass_call(ok.out_before_optional, output_shape_dtype=(s(), s()))


def test_output_first_binds_to_the_written_parameter_with_one_compile(compiles):
    lowered = first_call().lower(s(), s())
    assert operands(lowered) == "x,y,out"
    # The rule's binding (out = y) was traced, not compiled: one compile ran.
    assert compiles() == 1


def test_a_call_with_unnamed_outputs_binds_once_and_compiles_once(compiles, monkeypatch):
    binds = []
    real = pipeline.Launcher.bind
    monkeypatch.setattr(pipeline.Launcher, "bind",
                        lambda *a, **kw: binds.append(1) or real(*a, **kw))
    lowered = first_call().lower(s(), s())
    assert operands(lowered) == "x,y,out"
    assert len(binds) == 1 and compiles() == 1


def test_a_second_call_site_binds_there_from_the_start(compiles):
    first_call().lower(s(), s())
    assert operands(first_call().lower(s(n=2048), s(n=2048))) == "x,y,out"
    assert compiles() == 1  # the same kernel: another shape, same classes


def test_outputs_between_inputs_when_the_rule_does_not_compile(compiles):
    # The rule puts the float outputs at lse and index: the gather k[index]
    # fails in its dynamic and its fully static form (two DSL runs); the
    # next placement compiles, and its trace writes out and lse.
    lowered = between_call().lower(s(), s(), s(i32))
    assert operands(lowered) == "q,k,index,out,lse"
    assert compiles() == 3
    # A later call site finds the rule's failure and the kernel in memory.
    assert operands(between_call().lower(s(), s(), s(i32))) == "q,k,index,out,lse"
    assert compiles() == 3


def test_outputs_before_an_optional_input_given(compiles):
    lowered = loss_call().lower(s(), s(), s(i32))
    assert operands(lowered) == "x,y,labels,loss,dX"


def test_outputs_before_an_optional_input_left_out():
    assert operands(loss_call().lower(s(), s())) == "x,y,loss,dX"


def test_outputs_last_are_unchanged(compiles):
    call = cutecall.cutlass_call(ok.out_last, output_shape_dtype=s())
    assert operands(call.lower(s(), s())) == "x,y,out"
    assert compiles() == 1


def test_output_params_still_names_them(compiles):
    call = cutecall.cutlass_call(ok.out_first, output_shape_dtype=s(),
                                 output_params=("out",))
    assert operands(call.lower(s(), s())) == "x,y,out"
    assert compiles() == 1


def test_under_jit_the_outputs_are_found_too():
    call = first_call()
    text = jax.jit(lambda x, y: call(x, y)).trace(s(), s()).lower(
        lowering_platforms=("cuda",)).as_text()
    assert re.search(r'operands = "x,y,out"', text)


def test_the_launcher_remembers_what_the_kernel_writes():
    call = between_call()
    call.lower(s(), s(), s(i32))
    writes = stage.known_writes(call.launcher)
    assert writes.written == {"out", "lse"} and not writes.unattributed


@pytest.mark.gpu
def test_gpu_outputs_first_between_and_before_optional():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    idx = rng.integers(0, N, N).astype(np.int32)
    out = first_call()(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_array_equal(np.asarray(out), x + y)
    o, lse = between_call()(jnp.asarray(x), jnp.asarray(y), jnp.asarray(idx))
    np.testing.assert_array_equal(np.asarray(o), x + y[idx])
    np.testing.assert_array_equal(np.asarray(lse), x - y[idx])
    loss, dx = loss_call()(jnp.asarray(x), jnp.asarray(y), jnp.asarray(idx))
    np.testing.assert_array_equal(np.asarray(loss), x * y)
    np.testing.assert_array_equal(np.asarray(dx), x - idx.astype(np.float32))
    loss, dx = loss_call()(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_array_equal(np.asarray(dx), x)
