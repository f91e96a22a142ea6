"""A parameter annotated with a NamedTuple (FA4's ``blocksparse_tensors:
Optional[BlockSparseTensors]``) takes the plain tuple its authors pass: the
driver rebuilds the annotated NamedTuple, so the kernel reads it by field
name. CPU: lowered for the cuda platform (a real sm_90a compile)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall

import outputs_kernels as ok

N = 1000


def s(n=N):
    return jax.ShapeDtypeStruct((n,), jnp.float32)


def call():
    return cutecall.cutlass_call(ok.named, output_shape_dtype=lambda x, p: x)


def test_a_plain_tuple_reaches_the_kernel_as_the_annotated_namedtuple(compiles):
    text = call().lower(s(), (s(), s())).as_text()
    assert re.search(r'operands = "x,pair\.a,pair\.b,out"', text)
    assert compiles() == 1


def test_the_namedtuple_itself_compiles_the_same_kernel(compiles):
    call().lower(s(), (s(), s()))
    call().lower(s(), ok.Pair(s(), s()))
    assert compiles() == 1


@pytest.mark.gpu
def test_gpu_plain_tuple():
    x, a, b = (jnp.arange(N, dtype=jnp.float32) * k for k in (1.0, 2.0, 3.0))
    out = call()(x, (a, b))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(a * x + b))
