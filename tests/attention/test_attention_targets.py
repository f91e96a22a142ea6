"""cutecall.attention follows the target arch (``cutecall.current_target``:
``$CUTECALL_ARCH``, the GPU, else sm_90a): the same call lowers through
FA4's sm80 kernels for sm_80 and its sm120 kernels for sm_120a, and what
FA4 lacks on an arch is a ValueError naming the option and the arch, raised
before anything compiles."""

import re

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import attention  # noqa: E402
from cutecall.attention import reference as R  # noqa: E402

S = jax.ShapeDtypeStruct
bf16, i32, f32 = jnp.bfloat16, jnp.int32, jnp.float32
Q, KV = S((2, 300, 8, 128), bf16), S((2, 300, 2, 128), bf16)


def lowered(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def kernels_in(text: str) -> list:
    return sorted(re.findall(r'kernel = "([^"]+)"', text))


def loss(**options):
    return lambda q, k, v: attention(q, k, v, **options).astype(f32).sum()


def test_sm80_runs_fas_sm80_forward(monkeypatch, compiles):
    """A100 (sm_80): FA4's FlashAttentionForwardSm80, 128x64 tiles; FA4's
    interface has no sm8x backward, so grad raises naming the arch."""
    monkeypatch.setenv("CUTECALL_ARCH", "sm_80")
    names = kernels_in(lowered(lambda q, k, v: attention(q, k, v, causal=True), Q, KV, KV))
    assert names == ["fa4_fwd_bfloat16_d128_g4_causal_sm_80"]
    assert compiles() == 1
    with pytest.raises(ValueError, match=re.escape("target arch sm_80: FA4's interface "
                                                   "has no sm8x backward")):
        jax.eval_shape(jax.grad(loss(causal=True)), Q, KV, KV)


def test_sm120_runs_fas_sm120_forward_and_backward(monkeypatch, compiles):
    """RTX 5090 (sm_120a): FA4's sm120 classes, forward and backward."""
    monkeypatch.setenv("CUTECALL_ARCH", "sm_120a")
    q = S((1, 200, 4, 64), bf16)
    names = kernels_in(lowered(jax.grad(loss(), argnums=(0, 1, 2)), q, q, q))
    assert [n.split("_bfloat16")[0] for n in names] == \
        ["fa4_bwd", "fa4_bwd_postprocess_dq", "fa4_bwd_preprocess", "fa4_fwd"]
    assert all(n.endswith("sm_120a") for n in names), names
    assert compiles() == 4


@pytest.mark.parametrize("arch, q, k, kwargs, message", [
    ("sm_75", Q, KV, {}, "target arch 'sm_75' (compute capability 7.5): "
                         "FlashAttention-4 has no kernels for it"),
    ("sm_90a", Q, KV, dict(num_splits=2), "num_splits=2 on sm_90a (FA4's sm90 forward): "
                                          "FA4 splits KV on sm100/sm103 only"),
    ("sm_100a", S((2, 64, 4, 192), bf16), S((2, 64, 4, 192), bf16), {},
     "must be one of FA4's sm100 (head_dim, head_dim_v) pairs"),
    ("sm_100a", S((300, 8, 128), bf16), S((300, 2, 128), bf16),
     dict(cu_seqlens_q=S((4,), i32), cu_seqlens_k=S((4,), i32), num_splits=0),
     "num_splits=0 with cu_seqlens_q/seqused_q"),
    ("sm_100a", Q, KV, dict(num_splits=300), "num_splits must be an int in [0, 256]"),
    ("sm_80", S((3, 1, 8, 128), bf16), S((10, 64, 2, 128), bf16),
     dict(page_table=S((3, 4), i32)), "page_table on sm_80 (FA4's sm80 forward)"),
    ("sm_80", Q, KV, dict(score_mod=R.alibi_score_mod(1.0)), "score_mod on sm_80"),
    ("sm_120a", Q, KV, dict(learnable_sink=S((8,), f32)), "learnable_sink on sm_120a"),
    ("sm_120a", S((2, 64, 4, 256), bf16), S((2, 64, 4, 256), bf16), {},
     "head dims (256, 256) on sm_120a: FA4's sm120 forward tiles (128, 64) do not fit"),
])
def test_what_an_arch_lacks_raises_naming_it(monkeypatch, compiles, arch, q, k, kwargs,
                                             message):
    monkeypatch.setenv("CUTECALL_ARCH", arch)
    with pytest.raises(ValueError, match=re.escape(message)):
        jax.eval_shape(lambda q, k, v: attention(q, k, v, **kwargs), q, k, k)
    assert compiles() == 0


@pytest.mark.parametrize("arch, q, kwargs, message", [
    ("sm_100a", S((1, 256, 4, 256), bf16), dict(softcap=10.0),
     "softcap with head dim 256 on sm_100a (FA4's dedicated hd256 backward)"),
    ("sm_100a", S((1, 256, 4, 256), bf16), dict(return_lse=True),
     "return_lse (the LSE's cotangent) with head dim 256"),
    ("sm_120a", S((1, 256, 4, 64), bf16), dict(mask_mod=R.prefix_lm_mask_mod(8)),
     "mask_mod on sm_120a (FA4's sm120 backward)"),
])
def test_backward_limits_per_arch_raise_at_grad_time(monkeypatch, compiles, arch, q, kwargs,
                                                     message):
    """Differentiating names the option and the arch (the forward runs:
    these are FA4's backward's limits), before anything compiles."""
    monkeypatch.setenv("CUTECALL_ARCH", arch)

    def f(q, k, v):
        out = attention(q, k, v, **kwargs)
        return (out[0] if isinstance(out, tuple) else out).astype(f32).sum()
    with pytest.raises(ValueError, match=re.escape(message)):
        jax.eval_shape(jax.grad(f), q, q, q)
    assert compiles() == 0


@pytest.mark.parametrize("arch, splits", [("sm_90a", 1), ("sm_120a", 1), ("sm_80", 1),
                                          ("sm_100a", 18)])
def test_num_splits_0_is_fas_heuristic_where_fa4_splits_and_1_elsewhere(arch, splits):
    """Portable decode code passes num_splits=0 on every arch."""
    import cutecall
    from cutecall.attention.checks import check
    q, kv = S((4, 1, 8, 128), bf16), S((4, 8192, 2, 128), bf16)
    c = check(q, kv, kv, causal=True, window_size=(None, None), softcap=0.0,
              score_mod=None, score_mod_bwd=None, mask_mod=None, cu_seqlens_q=None,
              cu_seqlens_k=None, seqused_q=None, seqused_k=None, max_seqlen_q=None,
              max_seqlen_k=None, page_table=None, learnable_sink=None, aux_tensors=None,
              aux_scalars=None, scale=None, num_splits=0,
              target=cutecall.current_target(arch)).config
    assert c.num_splits == splits
