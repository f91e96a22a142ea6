"""cutecall.quack on CPU: softmax, RMSNorm and cross-entropy and
their gradients lower for the cuda platform with QuACK's forward and
backward kernels (compiled for sm_90a, no GPU needed)."""

import re
import warnings

import pytest

pytest.importorskip("quack")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall import quack  # noqa: E402

S = jax.ShapeDtypeStruct


def kernels(fn, *args) -> list:
    """The QuACK kernels in `fn`'s cuda lowering. The wrappers declare the
    static row length QuACK's kernels need: no static-fallback warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", cutecall.StaticFallbackWarning)
        text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    return sorted(set(re.findall(r'kernel = "(quack_[a-z_]+)', text)))


def test_softmax_and_its_gradient_lower():
    x = S((4, 1000, 1024), jnp.bfloat16)
    assert jax.eval_shape(quack.softmax, x).shape == x.shape
    assert kernels(jax.grad(lambda x: (quack.softmax(x).astype(jnp.float32) ** 2).sum()),
                   x) == ["quack_softmax_bfloat", "quack_softmax_bwd_bfloat"]


def test_rmsnorm_and_its_gradients_lower():
    x, w = S((1000, 2048), jnp.bfloat16), S((2048,), jnp.float32)
    grad = jax.grad(lambda x, w: quack.rmsnorm(x, w).astype(jnp.float32).sum(),
                    argnums=(0, 1))
    dx, dw = jax.eval_shape(grad, x, w)
    assert (dx.shape, dx.dtype, dw.shape, dw.dtype) == (x.shape, x.dtype, w.shape, w.dtype)
    assert kernels(grad, x, w) == ["quack_rmsnorm_bfloat", "quack_rmsnorm_bwd_bfloat"]


def test_cross_entropy_and_its_gradient_lower():
    x, t = S((2, 500, 4096), jnp.bfloat16), S((2, 500), jnp.int32)
    assert jax.eval_shape(quack.cross_entropy, x, t).shape == (2, 500)
    grad = jax.grad(lambda x, t: quack.cross_entropy(x, t).mean())
    assert jax.eval_shape(grad, x, t).shape == x.shape
    assert kernels(grad, x, t) == ["quack_cross_entropy_bfloat",
                                   "quack_cross_entropy_bwd_bfloat"]
