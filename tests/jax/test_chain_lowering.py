"""A chain of cutecall calls in one ``jit`` that keeps every output -- how
bench/external times the JAX front (issue 37, section 2) -- lowers to the
custom calls alone: no copy, transpose, zero-fill or slice around them, no
output aliasing (XLA would copy an aliased operand still live), and the
arrays' default row-major layouts on both sides (a layout XLA does not use
would make it transpose). Counted in the HLO, never timed. The GPU test
counts the same in the executable XLA compiles (its own passes add nothing
either)."""

import re

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import cutecall
from cutecall.examples import kernels

N, K = 4096, 3
EXTRA_OPS = ("copy", "transpose", "broadcast", "pad", "slice", "dynamic_slice",
             "dynamic_update_slice", "convert", "reshape")


def like(a, *_):
    return jax.ShapeDtypeStruct(a.shape, a.dtype)


def chain(add):
    """K adds, each on the previous sum, every sum a result (an
    optimization barrier orders the calls, as bench/timing.jax_chain)."""
    def run(a, b):
        outs = []
        for _ in range(K):
            a = add(a, b)
            outs.append(a)
            a, b = lax.optimization_barrier((a, b))
        return outs
    return jax.jit(run)


def stablehlo(add) -> str:
    x = jax.ShapeDtypeStruct((N,), jnp.float32)
    return chain(add).trace(x, x).lower(lowering_platforms=("cuda",)).as_text()


def test_chain_lowers_to_the_custom_calls_alone():
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like,
                                name="chain_add")
    text = stablehlo(add)
    calls = [ln for ln in text.splitlines() if "stablehlo.custom_call @cutecall" in ln]
    # One custom call per kernel call, inline or in a function called K times.
    assert len(calls) * max(1, len(re.findall(r"\bcall @", text))) == K, text[:3000]
    for op in EXTRA_OPS:
        assert not re.search(rf"stablehlo\.{op}\b", text), (op, text[:3000])
    assert "output_operand_aliases" not in text
    for line in calls:
        assert "operand_layouts = [dense<0> : tensor<1xindex>, dense<0>" in line, line[-400:]
        assert "result_layouts = [dense<0> : tensor<1xindex>]" in line, line[-400:]


def test_two_dim_operands_keep_row_major():
    two_d = jax.ShapeDtypeStruct((64, 48), jnp.float32)
    tr = cutecall.cutlass_call(
        kernels.transpose, output_shape_dtype=lambda x: jax.ShapeDtypeStruct(
            x.shape[::-1], x.dtype), name="chain_transpose")
    text = jax.jit(lambda x: [tr(x), tr(x)]).trace(two_d).lower(
        lowering_platforms=("cuda",)).as_text()
    lines = [ln for ln in text.splitlines() if "stablehlo.custom_call @cutecall" in ln]
    assert lines
    for line in lines:
        assert "operand_layouts = [dense<[1, 0]>" in line, line[-400:]
        assert "result_layouts = [dense<[1, 0]>" in line, line[-400:]
    assert not re.search(r"stablehlo\.(copy|transpose)\b", text)


@pytest.mark.gpu
def test_compiled_chain_has_no_copies():
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like,
                                name="chain_add_gpu")
    a = jnp.arange(N, dtype=jnp.float32)
    text = chain(add).lower(a, a).compile().as_text()
    assert len(re.findall(r"\scustom-call\(", text)) == K, text[:3000]
    for op in ("copy", "copy-start", "transpose", "broadcast"):
        assert not re.search(rf"\s{op}\(", text), (op, text[:3000])
    outs = chain(add)(a, a)
    assert [float(o[1]) for o in outs] == [2.0, 3.0, 4.0]
