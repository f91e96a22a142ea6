"""A parameter annotated as a tuple of DSL scalars -- cuDNN's sm90
block-sparse backward takes ``problem_shape: Tuple[Int32, Int32, Int32,
Tuple[Int32, Int32]]`` and its authors pass ``(sq, sk, d, (h, b))`` -- takes
a tuple whose Python numbers are runtime scalars of the annotated types
(``_driver.pytree.item_annotations``): a new value compiles nothing, in
both fronts. CPU: compiles for sm_90a; the GPU test checks the values."""

from typing import Tuple

import cuda.bindings.driver as cuda
import numpy as np
import pytest

import cutlass.cute as cute
from cutlass import Float32, Int32

import cutecall
from cutecall._driver import pytree


@cute.kernel
def _affine_kernel(x: cute.Tensor, out: cute.Tensor, shift: Int32, scale: Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 128 + tidx
    if i < out.shape[0]:
        out[i] = x[i] * scale + Float32(shift)


@cute.jit
def affine(params: Tuple[Int32, Tuple[Int32, Float32]], x: cute.Tensor, out: cute.Tensor,
           stream: cuda.CUstream):
    """``out = x * params[1][1] + params[0] + params[1][0]``."""
    n = out.shape[0]
    _affine_kernel(x, out, params[0] + params[1][0], params[1][1]).launch(
        grid=((n + 127) // 128, 1, 1), block=(128, 1, 1), stream=stream)


def test_item_annotations():
    T = Tuple[Int32, Tuple[Int32, Float32]]
    assert pytree.item_annotations(T, 2) == [Int32, Tuple[Int32, Float32]]
    assert pytree.item_annotations(Tuple[Int32, ...], 3) == [Int32] * 3
    assert pytree.item_annotations(T, 3) is None  # says nothing
    assert pytree.item_annotations(None, 2) is None


def test_torch_tuple_of_runtime_scalars_compiles_once(compiles):
    torch = pytest.importorskip("torch")
    import cutecall.torch
    k = cutecall.torch.kernel(affine)
    meta = [torch.empty(1000, device="meta") for _ in range(2)]
    k.compile((1, (2, 0.5)), *meta)
    k.compile((3, (4, 2.0)), *meta)
    assert compiles() == 1
    assert k.output_params == ["out"]


def test_jax_tuple_of_runtime_scalars_compiles_once(compiles):
    import jax
    import jax.numpy as jnp
    s = jax.ShapeDtypeStruct((1000,), jnp.float32)
    call = cutecall.cutlass_call(affine, output_shape_dtype=s)
    call.lower((1, (2, 0.5)), s)
    call.lower((3, (4, 2.0)), s)
    assert compiles() == 1


@pytest.mark.gpu
def test_gpu_tuple_values_reach_the_kernel():
    import jax.numpy as jnp
    x = jnp.arange(1000, dtype=jnp.float32)
    call = cutecall.cutlass_call(affine, output_shape_dtype=jax_like(x))
    for params in ((1, (2, 0.5)), (3, (4, 2.0))):
        got = np.asarray(call(params, x))
        want = np.arange(1000, dtype=np.float32) * params[1][1] + params[0] + params[1][0]
        np.testing.assert_array_equal(got, want)


def jax_like(x):
    import jax
    return jax.ShapeDtypeStruct(x.shape, x.dtype)
