"""cutecall.attention's options on a GPU (beside ``test_gpu_flash_attention_options.py``,
``_ragged.py`` and ``_head_dims.py``): learnable sinks and their gradient,
seqused, paged KV decoding, and vmap over dense and packed calls. Each case
checks outputs, LSE and the gradients against the float32 reference
(``attention_checks.check``)."""

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from attention_checks import assert_close, bf16, check, f32, normal  # noqa: E402
from cutecall.attention import attention  # noqa: E402
from cutecall.attention import reference as R  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("sink_dtype", [f32, bf16])
def test_learnable_sink_and_its_gradient(sink_dtype):
    q = normal(0, (2, 257, 8, 128), bf16)
    k, v = normal(1, (2, 257, 2, 128), bf16), normal(2, (2, 257, 2, 128), bf16)
    sink = normal(3, (8,), sink_dtype)
    check(q, k, v, causal=True, learnable_sink=sink)


def test_seqused_dense():
    q, k, v = (normal(i, (3, 256, 4, 64), bf16) for i in range(3))
    used_q, used_k = jnp.asarray([256, 100, 1], jnp.int32), jnp.asarray([256, 17, 200], jnp.int32)
    o, lse = attention(q, k, v, seqused_q=used_q, seqused_k=used_k, return_lse=True)
    wo, wlse = R.reference(q, k, v, seqused_q=np.asarray(used_q), seqused_k=np.asarray(used_k))
    for b, n in enumerate(np.asarray(used_q)):  # rows past seqused_q are not written
        assert_close(o[b, :n], wo[b, :n], f"o[{b}]")
        assert_close(lse[b, :, :n], wlse[b, :, :n], f"lse[{b}]")


@pytest.mark.parametrize("page_size", [128, 64])  # TMA pages, cp.async pages
@pytest.mark.parametrize("sq", [1, 4, 16])
def test_paged_kv_decode(page_size, sq):
    b, hkv, d, pages_per_seq = 3, 2, 128, 6
    used = np.array([1, page_size * 3 + 5, page_size * pages_per_seq], np.int32)
    pool = 2 * b * pages_per_seq
    perm = np.random.default_rng(0).permutation(pool)[: b * pages_per_seq]
    table = perm.reshape(b, pages_per_seq).astype(np.int32)
    k = normal(1, (pool, page_size, hkv, d), bf16)
    v = normal(2, (pool, page_size, hkv, d), bf16)
    q = normal(0, (b, sq, 8, d), bf16)
    o, lse = jax.jit(lambda q, k, v, t, u: attention(
        q, k, v, page_table=t, seqused_k=u, causal=True, return_lse=True))(
            q, k, v, jnp.asarray(table), jnp.asarray(used))
    wo, wlse = R.reference(q, k, v, page_table=table, seqused_k=used, causal=True)
    assert_close(o, wo, "o")
    assert_close(lse, wlse, "lse")


def test_vmap_folds_dense_and_loops_packed_equal_each_example():
    q = normal(0, (3, 2, 200, 4, 64), bf16)
    used = jnp.asarray([[200, 13], [1, 150], [77, 200]], jnp.int32)
    f = lambda q, u: attention(q, q, q, seqused_k=u, causal=True)  # noqa: E731
    batched = jax.jit(jax.vmap(f))(q, used)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(batched[i], np.float32),
                                      np.asarray(jax.jit(f)(q[i], used[i]), np.float32))
    cu = jnp.asarray([[0, 5, 300], [0, 150, 300], [0, 299, 300]], jnp.int32)
    packed = lambda q, cu: attention(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu)  # noqa: E731
    x = normal(1, (3, 300, 4, 64), bf16)
    batched = jax.jit(jax.vmap(packed))(x, cu)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(batched[i], np.float32),
                                      np.asarray(jax.jit(packed)(x[i], cu[i]), np.float32))
