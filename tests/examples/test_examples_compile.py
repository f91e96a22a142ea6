"""Every example kernel compiles for sm_90a through cutecall on this machine
(no GPU needed) and lowers to one cutecall custom call."""

import jax
import jax.numpy as jnp
import pytest

import cutecall
from cutecall.examples import kernels

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16

EXAMPLES = {
    "empty_launcher": ((S((1024,), F32),), S((1024,), F32), {}),
    "vector_add": ((S((1000,), F32), S((1000,), F32)), S((1000,), F32), {}),
    "scale_bias_act": ((S((64, 33), F32), S((33,), F32)), S((64, 33), F32),
                       dict(alpha=0.5, relu=False)),
    "transpose": ((S((70, 40), F16),), S((40, 70), F16), {}),
    "row_sum": ((S((9, 1000), F32),), S((9,), F32), {}),
    "gemm": ((S((256, 64), F16), S((64, 128), F16)), S((256, 128), F32), {}),
    "copy": ((S((1 << 20,), F32),), S((1 << 20,), F32), {}),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_compiles_and_lowers(name):
    args, out, constexprs = EXAMPLES[name]
    call = cutecall.cutlass_call(getattr(kernels, name), output_shape_dtype=out,
                                 **constexprs)
    text = call.lower(*args).as_text()
    assert text.count("stablehlo.custom_call @cutecall_call_v1") == 1
