"""An output aliased whole to an input leaf still reaches the parameter
``output_params`` names for it (``CutlassCall._unpassed``): the kernel gets
the one buffer twice, as QuACK's symmetric GEMM takes D through ``mD`` and
through ``epilogue_args.mAuxOut`` (a transposed view of D). Without the
name, an aliased output is not passed (the kernel writes through the
input) unless the binding then leaves a parameter without a value: it is
passed too, and binds where the kernel writes it. CPU: lowering for the cuda platform; the GPU test runs it."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall.examples import layouts

f32 = jnp.float32


def write_both(stream, x, out, sink):
    """``out = x`` and ``sink["view"] = x``: two parameters the kernel writes."""
    layouts.copy1d(stream, x, out)
    layouts.copy1d(stream, x, sink["view"])


def named_call():
    return cutecall.cutlass_call(write_both, output_shape_dtype=lambda x, s: x,
                                 output_params=("out",),
                                 input_output_aliases={(1, "view"): 0})


def test_named_output_aliased_whole_reaches_its_parameter_and_the_input_leaf():
    s = jax.ShapeDtypeStruct((64,), f32)
    text = named_call().lower(s, {"view": s}).as_text()
    assert re.search(r'operands = "x,sink\[\'view\'\],out"', text)
    # The output is the aliased input's buffer (operand 1, sink['view']).
    assert re.search(r"output_operand_alias<output_tuple_indices = \[\], "
                     r"operand_index = 1", text)


def test_without_the_name_an_aliased_output_reaches_the_parameter_left_empty():
    # Not passed, the output leaves 'sink' without a value (no binding
    # fits): it is passed too, and binds where the named call puts it.
    call = cutecall.cutlass_call(write_both, output_shape_dtype=lambda x, s: x,
                                 input_output_aliases={(1, "view"): 0})
    s = jax.ShapeDtypeStruct((64,), f32)
    text = call.lower(s, {"view": s}).as_text()
    assert re.search(r'operands = "x,sink\[\'view\'\],out"', text)
    assert re.search(r"output_operand_alias<output_tuple_indices = \[\], "
                     r"operand_index = 1", text)


def test_an_aliased_output_no_parameter_takes_is_not_passed():
    # Passing it fits no better: the first binding's error stands.
    def write_view(stream, x, sink):
        layouts.copy1d(stream, x, sink["view"])
    call = cutecall.cutlass_call(write_view, output_shape_dtype=lambda x, s, y: x,
                                 input_output_aliases={(1, "view"): 0})
    s = jax.ShapeDtypeStruct((64,), f32)
    with pytest.raises(TypeError, match="no binding fits|receives no value"):
        call.lower(s, {"view": s}, s)


@pytest.mark.gpu
def test_both_writes_land_in_the_one_output():
    x = jnp.arange(300, dtype=f32)
    out = named_call()(x, {"view": jnp.full((300,), np.nan, f32)})
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x))
