"""cutecall.attention's argument errors: each names the
argument and the value and is raised before anything compiles (forward
errors when called, backward-only limits of FA4's sm90 path when
differentiated)."""

import re

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import reference as R  # noqa: E402
from cutecall.attention import attention  # noqa: E402

S = jax.ShapeDtypeStruct
bf16, i32, f32 = jnp.bfloat16, jnp.int32, jnp.float32
Q, KV = S((2, 64, 4, 128), bf16), S((2, 64, 2, 128), bf16)
PACKED, CU = S((100, 4, 128), bf16), S((3,), i32)


@pytest.mark.parametrize("kwargs, message", [
    (dict(window_size=(8,)), "window_size must be a pair (left, right), got (8,)"),
    (dict(window_size=(-1, 0)), "window_size left must be None (unbounded) or an int >= 0, got -1"),
    (dict(window_size=(4.5, 0)), "got 4.5"),
    (dict(causal=True, window_size=(8, 3)), "causal=True with window_size right=3"),
    (dict(mask_mod=R.prefix_lm_mask_mod(4), causal=True), "mask_mod with causal=True"),
    (dict(softcap=-1.0), "softcap must be a float >= 0 (0: none), got -1.0"),
    (dict(softcap=5.0, score_mod=R.alibi_score_mod(1.0)), "softcap=5.0 with a score_mod"),
    (dict(score_mod="tanh"), "score_mod must be a CuTe DSL callable"),
    (dict(score_mod_bwd=R.alibi_score_mod_bwd()), "without a score_mod"),
    (dict(learnable_sink=S((3,), f32)), "learnable_sink must be (4,)"),
    (dict(learnable_sink=S((4,), i32)), "got int32 (4,)"),
    (dict(aux_tensors=S((4,), f32), score_mod=R.alibi_score_mod(1.0)),
     "aux_tensors must be a list of arrays"),
    (dict(aux_scalars=(1.0,)), "without a score_mod or mask_mod"),
    (dict(aux_scalars=("x",), score_mod=R.alibi_score_mod(1.0)), "aux_scalars[0] must be"),
    (dict(max_seqlen_q=2.5), "max_seqlen_q must be None or a Python int >= 0, got 2.5"),
    (dict(seqused_k=S((3,), i32)), "seqused_k must have shape (B,) = (2,), got (3,)"),
    (dict(seqused_k=S((2,), f32)), "seqused_k must be int32, got float32"),
    (dict(scale="x"), "scale must be a Python float"),
])
def test_dense_option_errors(compiles, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        jax.eval_shape(lambda q, k, v: attention(q, k, v, **kwargs), Q, KV, KV)
    assert compiles() == 0


@pytest.mark.parametrize("q, k, kwargs, message", [
    (PACKED, PACKED, dict(cu_seqlens_q=S((3,), f32), cu_seqlens_k=CU),
     "cu_seqlens_q must be int32, got float32"),
    (PACKED, PACKED, dict(cu_seqlens_q=CU, cu_seqlens_k=S((4,), i32)),
     "cu_seqlens_k must have shape (B + 1,) = (3,), got (4,)"),
    (PACKED, PACKED, dict(cu_seqlens_q=S((3, 1), i32), cu_seqlens_k=CU),
     "cu_seqlens_q must be (B + 1,)"),
    (Q, PACKED, dict(cu_seqlens_q=CU, cu_seqlens_k=CU),
     "with cu_seqlens_q, q must be packed (total_q, H, D), got shape (2, 64, 4, 128)"),
    (PACKED, KV, dict(cu_seqlens_q=S((4,), i32)), "k's batch (2) must be cu_seqlens_q's B (3)"),
    (S((2, 64, 4, 128), bf16), PACKED, dict(cu_seqlens_k=S((4,), i32)),
     "q's batch (2) must be the B of cu_seqlens_k/page_table (3)"),
    (S((3, 1, 4, 128), bf16), S((10, 64, 2, 128), bf16),
     dict(page_table=S((3, 4), jnp.int64)), "page_table must be int32 (B, max_pages)"),
    (S((3, 1, 4, 128), bf16), S((10, 64, 2, 128), bf16),
     dict(page_table=S((2, 4), i32)), "with B = 3, got int32 (2, 4)"),
    (S((3, 1, 4, 128), bf16), S((10, 64, 2, 128), bf16),
     dict(page_table=S((3, 4), i32), cu_seqlens_k=S((4,), i32)), "page_table with cu_seqlens_k"),
    (S((3, 1, 4, 128), bf16), S((64, 2, 128), bf16), dict(page_table=S((3, 4), i32)),
     "k must be (num_pages, page_size, Hkv, D), got shape (64, 2, 128)"),
    (S((2, 8, 4, 80), bf16), S((2, 8, 4, 80), bf16), {}, "head dims (q 80, k 80, v 80)"),
    (S((2, 8, 4, 128), jnp.float32), S((2, 8, 4, 128), jnp.float32), {},
     "bfloat16 or float16, got float32"),
])
def test_layout_errors(compiles, q, k, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        jax.eval_shape(lambda q, k, v: attention(q, k, v, **kwargs), q, k, k)
    assert compiles() == 0


def test_dtype_mismatch_and_dv_pairs(compiles):
    with pytest.raises(ValueError, match=re.escape("got bfloat16, float16, bfloat16")):
        jax.eval_shape(attention, Q, S(KV.shape, jnp.float16), KV)
    with pytest.raises(ValueError, match=re.escape("(q 128, k 128, v 64)")):
        jax.eval_shape(attention, Q, KV, S((2, 64, 2, 64), bf16))
    assert compiles() == 0


@pytest.mark.parametrize("q, k, v, kwargs, message", [
    (S((2, 1, 4, 128), bf16), S((8, 128, 2, 128), bf16), S((8, 128, 2, 128), bf16),
     dict(page_table=S((2, 4), i32)), "page_table: FA4's backward has no paged KV"),
    (Q, Q, Q, dict(score_mod=R.alibi_score_mod(1.0), aux_scalars=(1.0,),
                   aux_tensors=[S((4,), f32)]), "score_mod without score_mod_bwd"),
    (S((1, 64, 4, 192), bf16), S((1, 64, 2, 192), bf16), S((1, 64, 2, 128), bf16), {},
     "head dims (192, 128) with GQA/MQA (qhead_per_kvhead=2)"),
])
def test_backward_limits_raise_at_grad_time_naming_the_option(compiles, q, k, v, kwargs,
                                                                message):
    f = lambda q, k, v, *extra: attention(q, k, v, **kwargs)  # noqa: E731
    loss = lambda q, k, v: f(q, k, v).astype(f32).sum()  # noqa: E731
    with pytest.raises(ValueError, match=re.escape(message)):
        jax.eval_shape(jax.grad(loss), q, k, v)
    assert compiles() == 0
    assert jax.eval_shape(f, q, k, v).shape[:-1] == q.shape[:-1]  # the forward works
