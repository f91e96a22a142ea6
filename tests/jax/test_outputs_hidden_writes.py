"""Outputs a placement question cannot see at first (``_driver.outputs``),
with no ``output_params``, through the JAX front:

* a kernel that asserts on a static stride before it writes
  (``rows_first``): the rule's placement fails in every form; the placement
  apart from it traces once its stride is compiled in (a guided form), its
  writes place the output -- a few traces, one kernel, never a compile per
  placement; called with the wrong stride, the placement apart from the
  rule's fails as the rule's did, and the call's own error comes with a
  note, after those traces alone;
* a kernel that writes only through inline PTX at an address made of the
  output's pointer (``ptx_first``): the trace ties the store to ``out``;
* the same with the address passed through an opaque asm
  (``ptx_hidden``): refused, naming the kernel and its tensor parameters
  and asking for ``output_params=`` -- never bound to an input.

CPU: lowered for the cuda platform (real sm_90a compiles); the GPU test
checks the numbers."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall

import placement_kernels as pk


def s(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def operands(lowered) -> str:
    return re.search(r'operands = "([^"]*)"', lowered.as_text()).group(1)


@pytest.fixture
def no_rejections(monkeypatch):
    """No form rejected by an earlier test (``cutecall.clear_cache`` keeps
    them: a rejected form is not traced again in the process)."""
    import collections
    from cutecall._driver.store import memory
    monkeypatch.setattr(memory, "_rejected", collections.OrderedDict())


def rows_call():
    return cutecall.cutlass_call(pk.rows_first, output_shape_dtype=lambda x, w: x)


def test_a_kernel_that_asserts_a_stride_before_writing_is_placed(compiles, no_rejections):
    assert operands(rows_call().lower(s(100, 64), s(64))) == "x,w,out"
    # The rule's placement (out at w): 4 forms fail its assert. The one
    # apart: its dynamic form asks for the stride, its guided form traces
    # (no compile). The kernel: its dynamic form fails, the guided compiles.
    assert compiles() == 4 + 1 + 2
    assert operands(rows_call().lower(s(300, 64), s(64))) == "x,w,out"
    assert compiles() == 7  # learned, and the same kernel


def test_a_stride_no_placement_satisfies_gives_the_calls_error(compiles, no_rejections):
    with pytest.raises(cutecall.CompileError, match="rows must be 64 elements apart") as e:
        rows_call().lower(s(100, 32), s(32))
    assert any("output_params=" in n for n in getattr(e.value, "__notes__", ()))
    assert compiles() == 4 + 2  # the rule's forms, the one apart: no other placement


def test_a_store_through_inline_ptx_at_the_outputs_address_is_found(compiles):
    call = cutecall.cutlass_call(pk.ptx_first, output_shape_dtype=lambda x, y: x)
    assert operands(call.lower(s(1000), s(1000))) == "x,y,out"
    assert compiles() == 1


def test_a_store_at_an_address_no_trace_ties_is_refused(compiles):
    call = cutecall.cutlass_call(pk.ptx_hidden, output_shape_dtype=lambda x, y: x)
    with pytest.raises(ValueError, match=r"kernel 'ptx_hidden' stores through inline PTX"
                                         r".*output_params=.*parameters are out, x, y"):
        call.lower(s(1000), s(1000))
    assert compiles() == 0
    named = cutecall.cutlass_call(pk.ptx_hidden, output_shape_dtype=lambda x, y: x,
                                  output_params=("out",))
    assert operands(named.lower(s(1000), s(1000))) == "x,y,out"


@pytest.mark.gpu
def test_gpu_hidden_writes_land_in_the_output():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((100, 64), np.float32), rng.standard_normal(64, np.float32)
    np.testing.assert_array_equal(np.asarray(rows_call()(jnp.asarray(x), jnp.asarray(w))),
                                  x * w)
    a, b = rng.standard_normal(1000, np.float32), rng.standard_normal(1000, np.float32)
    call = cutecall.cutlass_call(pk.ptx_first, output_shape_dtype=lambda x, y: x)
    np.testing.assert_array_equal(np.asarray(call(jnp.asarray(a), jnp.asarray(b))), a + b)
