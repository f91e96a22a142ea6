"""cutecall.quack on a GPU: softmax, RMSNorm and cross-entropy and
their gradients against float32 JAX references, with row counts that are
not multiples of 16, leading batch dims, and vmap."""

import numpy as np
import pytest

pytest.importorskip("quack")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall import quack  # noqa: E402

pytestmark = pytest.mark.gpu
KEY = jax.random.key(0)


def close(got, want, name, atol=2e-2, rtol=2e-2):
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               atol=atol, rtol=rtol, err_msg=name)


@pytest.mark.parametrize("shape", [(1001, 1024), (2, 300, 4096)])
def test_softmax_and_gradient(shape):
    kx, kg = jax.random.split(KEY)
    x = (2 * jax.random.normal(kx, shape)).astype(jnp.bfloat16)
    g = jax.random.normal(kg, shape).astype(jnp.bfloat16)
    y, vjp = jax.vjp(quack.softmax, x)
    ry, rvjp = jax.vjp(lambda x: jax.nn.softmax(x, axis=-1), x.astype(jnp.float32))
    close(y, ry, "softmax", atol=1e-3)
    close(vjp(g)[0], rvjp(g.astype(jnp.float32))[0], "dx", atol=1e-3)


@pytest.mark.parametrize("shape", [(1001, 2048), (3, 333, 1024)])
def test_rmsnorm_and_gradients(shape):
    kx, kw, kg = jax.random.split(KEY, 3)
    x = jax.random.normal(kx, shape).astype(jnp.bfloat16)
    w = jax.random.normal(kw, shape[-1:], jnp.float32)
    g = jax.random.normal(kg, shape).astype(jnp.bfloat16)

    def ref(x, w, eps=1e-6):
        x = x.astype(jnp.float32)
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * w

    y, vjp = jax.jit(lambda x, w: jax.vjp(quack.rmsnorm, x, w))(x, w)
    ry, rvjp = jax.vjp(ref, x.astype(jnp.float32), w)
    close(y, ry, "rmsnorm")
    (dx, dw), (rdx, rdw) = vjp(g), rvjp(g.astype(jnp.float32))
    close(dx, rdx, "dx")
    close(dw, rdw, "dw", atol=0.5, rtol=2e-2)   # a sum over all rows
    assert dw.dtype == jnp.float32


@pytest.mark.parametrize("shape", [(1001, 4096), (2, 250, 32000)])
def test_cross_entropy_and_gradient(shape):
    kx, kt = jax.random.split(KEY)
    x = (2 * jax.random.normal(kx, shape)).astype(jnp.bfloat16)
    t = jax.random.randint(kt, shape[:-1], 0, shape[-1], jnp.int32)
    t = jnp.where(jnp.arange(t.size).reshape(t.shape) % 7 == 0, quack.IGNORE_INDEX, t)

    def ref(x, t):
        x = x.astype(jnp.float32)
        picked = jnp.take_along_axis(x, jnp.maximum(t, 0)[..., None], -1)[..., 0]
        return jnp.where(t == quack.IGNORE_INDEX, 0.0,
                         jax.nn.logsumexp(x, -1) - picked)

    loss = lambda f: (lambda x: f(x, t).mean())  # noqa: E731
    close(jax.jit(quack.cross_entropy)(x, t), ref(x, t), "loss", atol=1e-3)
    close(jax.grad(loss(quack.cross_entropy))(x), jax.grad(loss(ref))(x.astype(jnp.float32)),
          "dx", atol=1e-5)


def test_vmap_folds_and_matches():
    x = jax.random.normal(KEY, (4, 500, 1024)).astype(jnp.bfloat16)
    w = jnp.ones((1024,), jnp.float32)
    close(jax.vmap(quack.softmax)(x), quack.softmax(x), "softmax", atol=1e-6, rtol=0)
    close(jax.vmap(lambda x: quack.rmsnorm(x, w))(x), quack.rmsnorm(x, w), "rmsnorm",
          atol=1e-6, rtol=0)
