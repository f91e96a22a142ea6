"""cutecall.attention's options on a GPU: outputs, LSE and
the gradients of q, k, v (and the sink) against the float32 reference
(``flash_attention_reference.reference``, differentiated with jax.vjp), for
packed ragged sequences (lengths not multiples of any tile), sliding
windows at their edges, softcap, score/mask mods with aux tensors and
scalars, learnable sinks, paged KV decoding, head dims 96/192/256 and
192/128, bf16 and fp16, under jit and vmap.

Tolerance ("within bf16 tolerance"): the largest error is at most 2.5% of
the largest reference value (1.5% for fp16), plus a small absolute floor.
"""

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import reference as R  # noqa: E402
from cutecall.attention import attention  # noqa: E402

pytestmark = pytest.mark.gpu
bf16, f16, f32 = jnp.bfloat16, jnp.float16, jnp.float32


def normal(seed, shape, dtype):
    return jax.random.normal(jax.random.key(seed), shape, f32).astype(dtype)


def assert_close(got, want, name, dtype=bf16):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    finite = np.isfinite(want)
    assert (np.isfinite(got) == finite).all(), f"{name}: finite pattern differs"
    err = np.abs(np.where(finite, got - want, 0)).max()
    scale = np.abs(np.where(finite, want, 0)).max()
    tol = (2.5e-2 if dtype == bf16 else 1.5e-2) * scale + 2e-3
    assert err <= tol, f"{name}: max error {err:.3g} > {tol:.3g} (max |ref| {scale:.3g})"


def check(q, k, v, ref_kw=None, **kw):
    """Outputs, LSE and gradients of attention(..., **kw) against the
    reference (with ref_kw overriding its mods)."""
    dtype = q.dtype
    sink = kw.get("learnable_sink")
    args = (q, k, v) + ((sink,) if sink is not None else ())

    def ours(q, k, v, *s):
        o, lse = attention(q, k, v, **dict(kw, return_lse=True, **(
            {"learnable_sink": s[0]} if s else {})))
        return o, lse

    def ref(q, k, v, *s):
        rk = {n: kw[n] for n in ("causal", "window_size", "softcap", "cu_seqlens_q",
                                 "cu_seqlens_k", "seqused_q", "seqused_k", "page_table",
                                 "scale") if n in kw}
        rk.update(ref_kw or {})
        return R.reference(q, k, v, learnable_sink=s[0] if s else None, **rk)
    (o, lse), vjp = jax.vjp(jax.jit(ours), *args)
    (wo, wlse), wvjp = jax.vjp(ref, *args)
    assert_close(o, wo, "o", dtype)
    assert_close(lse, wlse, "lse", dtype)
    do = normal(9, o.shape, dtype)
    dlse = normal(8, lse.shape, f32) * 0.1
    dlse = jnp.where(jnp.isfinite(wlse), dlse, 0)
    got = vjp((do, dlse))
    want = wvjp((do.astype(f32), dlse))
    for name, g, w in zip(("dq", "dk", "dv", "dsink"), got, want):
        assert_close(g, w, name, dtype)
    return o


@pytest.mark.parametrize("lengths, causal, window, hkv", [
    ([1, 129, 387], True, (64, None), 2),      # causal sliding window, GQA
    ([77, 300, 5], False, (32, 17), 4),        # two-sided window, MHA
    ([200, 1, 513], True, (None, None), 1),    # MQA
])
def test_packed_ragged_sequences(lengths, causal, window, hkv):
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    total = int(cu[-1])
    q = normal(0, (total, 4, 128), bf16)
    k, v = normal(1, (total, hkv, 128), bf16), normal(2, (total, hkv, 128), bf16)
    check(q, k, v, causal=causal, window_size=window, cu_seqlens_q=jnp.asarray(cu),
          cu_seqlens_k=jnp.asarray(cu), max_seqlen_q=max(lengths))


def test_window_edges_softcap_fp16_and_sq_ne_sk():
    q = normal(0, (2, 333, 4, 64), f16)
    k, v = normal(1, (2, 517, 2, 64), f16), normal(2, (2, 517, 2, 64), f16)
    for window in ((0, 0), (1, 0), (128, 127), (None, 64)):
        check(q, k, v, window_size=window, softcap=5.0)


def test_score_mod_with_aux_tensor_and_runtime_scalar():
    q, k, v = (normal(i, (2, 300, 4, 128), bf16) for i in range(3))
    slopes = jnp.asarray([2.0 ** (-8 * (h + 1) / 4) for h in range(4)], f32)
    for logit_scale in (0.8, 1.3):  # a runtime value: no recompile
        check(q, k, v, score_mod=R.alibi_score_mod(0.5), score_mod_bwd=R.alibi_score_mod_bwd(),
              aux_tensors=[slopes], aux_scalars=(logit_scale,),
              ref_kw=dict(score_mod=R.alibi_reference(0.5, slopes, logit_scale)))


def test_mask_mod():
    q, k, v = (normal(i, (1, 400, 2, 128), bf16) for i in range(3))
    check(q, k, v, mask_mod=R.prefix_lm_mask_mod(100),
          ref_kw=dict(mask_mod=R.prefix_lm_reference(100)))


@pytest.mark.parametrize("sink_dtype", [f32, bf16])
def test_learnable_sink_and_its_gradient(sink_dtype):
    q = normal(0, (2, 257, 8, 128), bf16)
    k, v = normal(1, (2, 257, 2, 128), bf16), normal(2, (2, 257, 2, 128), bf16)
    sink = normal(3, (8,), sink_dtype)
    check(q, k, v, causal=True, learnable_sink=sink)


@pytest.mark.parametrize("d, dv, hkv", [(96, 96, 2), (192, 192, 4), (256, 256, 4),
                                        (192, 128, 4)])
def test_head_dims(d, dv, hkv):
    q = normal(0, (2, 300, 4, d), bf16)
    k, v = normal(1, (2, 300, hkv, d), bf16), normal(2, (2, 300, hkv, dv), bf16)
    check(q, k, v, causal=True)


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
