"""cutecall.attention on a GPU: outputs and the gradients of
q, k and v against jax.nn.dot_product_attention in float32, for MHA, GQA and
MQA, causal and not, head dims 64 and 128, bfloat16 and float16, and
sequence lengths that are not multiples of any tile; under jit,
value_and_grad and vmap (folded); shard_map over the batch on 2 GPUs.

Tolerance ("within bf16 tolerance"): the kernel's largest error against the
float32 reference is at most twice that of XLA's own attention run in the
inputs' dtype, plus a small absolute floor."""

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import attention  # noqa: E402

pytestmark = pytest.mark.gpu
KEY = jax.random.key(1)

CASES = [  # B, Sq, Sk, H, Hkv, D, dtype, causal
    (2, 1000, 1000, 4, 4, 128, jnp.bfloat16, False),
    (2, 1000, 1000, 4, 4, 128, jnp.bfloat16, True),
    (1, 777, 777, 8, 2, 64, jnp.float16, True),
    (2, 300, 1000, 8, 1, 128, jnp.bfloat16, False),
    (2, 513, 513, 4, 2, 64, jnp.bfloat16, False),
]


def inputs(b, sq, sk, h, hkv, d, dtype, seed=0):
    kq, kk, kv, kd = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(kq, (b, sq, h, d), jnp.float32).astype(dtype)
    k = jax.random.normal(kk, (b, sk, hkv, d), jnp.float32).astype(dtype)
    v = jax.random.normal(kv, (b, sk, hkv, d), jnp.float32).astype(dtype)
    do = jax.random.normal(kd, (b, sq, h, d), jnp.float32).astype(dtype)
    return q, k, v, do


def run(fn, q, k, v, do, dtype):
    """(o, (dq, dk, dv)) of `fn` on the inputs cast to `dtype`."""
    o, vjp = jax.vjp(fn, *(x.astype(dtype) for x in (q, k, v)))
    return o, vjp(do.astype(dtype))


def assert_close(got, want, lowp, name):
    got, want, lowp = (np.asarray(x, np.float32) for x in (got, want, lowp))
    err, floor = np.abs(got - want).max(), np.abs(lowp - want).max()
    assert np.isfinite(got).all(), f"{name}: non-finite values"
    assert err <= 2 * floor + 2e-3, f"{name}: max error {err:.3g} vs XLA's {floor:.3g}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(
    str(x.__name__ if hasattr(x, "__name__") else x) for x in c))
def test_outputs_and_gradients_match_the_reference(case):
    b, sq, sk, h, hkv, d, dtype, causal = case
    q, k, v, do = inputs(b, sq, sk, h, hkv, d, dtype)
    ours = jax.jit(lambda q, k, v, do: run(
        lambda q, k, v: attention(q, k, v, causal=causal), q, k, v, do, dtype))(q, k, v, do)
    f = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=causal)
    want = jax.jit(lambda q, k, v, do: run(f, q, k, v, do, jnp.float32))(q, k, v, do)
    lowp = jax.jit(lambda q, k, v, do: run(f, q, k, v, do, dtype))(q, k, v, do)
    (o, (dq, dk, dv)), (wo, (wq, wk, wv)), (lo, (lq, lk, lv)) = ours, want, lowp
    for name, g, w, l in (("o", o, wo, lo), ("dq", dq, wq, lq), ("dk", dk, wk, lk),
                          ("dv", dv, wv, lv)):
        assert g.dtype == dtype, name
        assert_close(g, w, l, name)


def test_value_and_grad_under_jit_equals_grad():
    q, k, v, _ = inputs(2, 512, 512, 4, 2, 128, jnp.bfloat16)
    loss = lambda q, k, v: attention(q, k, v, causal=True).astype(jnp.float32).sum()
    value, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(q, k, v)
    again = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
    assert np.isfinite(float(value))
    for g, a in zip(grads, again):
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(a, np.float32),
                                   rtol=2e-2, atol=2e-2)


def test_vmap_over_an_extra_batch_equals_each_example():
    q, k, v, do = inputs(6, 384, 384, 4, 4, 64, jnp.bfloat16)
    split = lambda x: x.reshape((3, 2) + x.shape[1:])
    f = lambda q, k, v, do: run(attention, q, k, v, do, jnp.bfloat16)
    batched = jax.jit(jax.vmap(f))(*(split(x) for x in (q, k, v, do)))
    for i in range(3):
        one = jax.jit(f)(*(split(x)[i] for x in (q, k, v, do)))
        np.testing.assert_allclose(np.asarray(batched[0][i], np.float32),
                                   np.asarray(one[0], np.float32), rtol=1e-2, atol=1e-2)
        for g, w in zip(batched[1], one[1]):
            np.testing.assert_allclose(np.asarray(g[i], np.float32),
                                       np.asarray(w, np.float32), rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(len(jax.devices()) < 2, reason="needs 2 GPUs")
def test_shard_map_training_step_equals_one_device():
    """A data-parallel step of a one-layer attention model (projections to
    q, k, v with GQA, causal FA4 attention, squared loss;
    ``cutecall.attention.training``): the batch split over 2 GPUs
    with shard_map, gradients averaged with pmean, equals the step on one
    device."""
    from cutecall.attention import training as at
    mesh = jax.make_mesh((2,), ("b",))
    w, x, y = at.problem(KEY, batch=4, seqlen=512, heads=8, heads_kv=2, head_dim=64,
                         embed=256)
    one = jax.jit(at.step)(w, x, y)
    sharded = at.sharded_step(mesh)(*at.place(mesh, w, x, y))
    for n in w:
        np.testing.assert_allclose(np.asarray(sharded[n]), np.asarray(one[n]),
                                   rtol=1e-2, atol=1e-4, err_msg=n)
        assert not np.allclose(np.asarray(one[n]), np.asarray(w[n])), n  # it moved
