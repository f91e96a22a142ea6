"""cutecall.attention's options on CPU (FA4's kernels compile
for sm_90a without a GPU): every option's forward and gradient lower for
cuda with the expected kernels, one compile per configuration (extents,
window sizes, scales and aux scalars are runtime), captured score/mask mod
values are compile-time, vmap folds or loops as declared, and the kernel
objects equal the ones FA4's own interface builds."""

import re

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import reference as R  # noqa: E402
from cutecall.attention import attention  # noqa: E402

S = jax.ShapeDtypeStruct
bf16, f16, i32, f32 = jnp.bfloat16, jnp.float16, jnp.int32, jnp.float32


def lowered(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def launches(text: str) -> list:
    """The kernel launches in the lowered module, by kind (names less config)."""
    return sorted(re.sub(r"_(bfloat16|float16)_.*", "", n)
                  for n in re.findall(r'kernel = "([^"]+)"', text))


FWD = ["fa4_fwd"]
BWD_MHA = ["fa4_bwd", "fa4_bwd_postprocess_dq", "fa4_bwd_preprocess", "fa4_fwd"]
BWD_GQA = sorted(BWD_MHA + ["fa4_bwd_postprocess_dkv"] * 2)


def grad_of(**options):
    def loss(q, k, v, *extra):
        kw = dict(options)
        for name, x in zip(kw.pop("_names", ()), extra):
            kw[name] = x
        out = attention(q, k, v, **kw)
        if kw.get("return_lse"):
            return out[0].astype(f32).sum() + out[1].sum()
        return out.astype(f32).sum()
    return loss


def test_varlen_window_softcap_sink_lse_one_compile_for_every_shape_and_window(compiles):
    """Packed GQA sequences, a causal sliding window, softcap, a learnable
    sink and a differentiated LSE: five kernels, compiled once; other
    lengths, batch sizes and window sizes reuse them."""
    def run(total_q, total_k, b, left):
        loss = grad_of(causal=True, window_size=(left, None), softcap=20.0, return_lse=True,
                       _names=("cu_seqlens_q", "cu_seqlens_k", "learnable_sink"))
        g = jax.grad(loss, argnums=(0, 1, 2, 5))
        return launches(lowered(g, S((total_q, 8, 128), bf16), S((total_k, 2, 128), bf16),
                                S((total_k, 2, 128), bf16), S((b + 1,), i32),
                                S((b + 1,), i32), S((8,), f32)))
    assert run(301, 517, 3, 64) == BWD_GQA
    assert compiles() == 5
    assert run(1000, 77, 5, 200) == BWD_GQA
    assert compiles() == 5


def test_dense_window_softcap_and_seqused_lower_with_gradients(compiles):
    q, kv, used = S((2, 333, 4, 64), f16), S((2, 400, 4, 64), f16), S((2,), i32)
    loss = grad_of(window_size=(32, 16), softcap=5.0, _names=("seqused_q", "seqused_k"))
    assert launches(lowered(jax.grad(loss, argnums=(0, 1, 2)), q, kv, kv, used, used)) \
        == BWD_MHA
    assert compiles() == 4


def test_score_mod_captured_values_compile_aux_scalars_do_not(compiles):
    """A score_mod with an aux tensor (slopes) and a runtime aux scalar:
    a new aux scalar value or a rebuilt mod with the same captured value
    is the same kernel; a new captured value is a new one."""
    q, slopes = S((2, 200, 4, 128), bf16), S((4,), f32)

    def lower(bias_scale, logit_scale):
        loss = grad_of(score_mod=R.alibi_score_mod(bias_scale),
                       score_mod_bwd=R.alibi_score_mod_bwd(),
                       aux_scalars=(logit_scale,), _names=("aux_tensors",))
        return launches(lowered(jax.grad(lambda q, k, v, s: loss(q, k, v, [s]),
                                         argnums=(0, 1, 2)), q, q, q, slopes))
    assert lower(0.5, 0.8) == BWD_MHA
    first = compiles()
    assert lower(0.5, 1.3) == BWD_MHA
    assert compiles() == first            # same mod, new runtime scalar
    lower(0.25, 0.8)
    assert compiles() == first + 2        # forward and backward recompile


def test_mask_mod_lowers_with_gradients(compiles):
    q = S((1, 256, 2, 128), bf16)
    loss = grad_of(mask_mod=R.prefix_lm_mask_mod(64))
    assert launches(lowered(jax.grad(loss, argnums=(0, 1, 2)), q, q, q)) == BWD_MHA


@pytest.mark.parametrize("page_size", [128, 64])  # TMA pages (== tile_n), cp.async pages
def test_paged_kv_decode_one_compile_for_every_query_length(compiles, page_size):
    pages, pt, used = S((40, page_size, 2, 128), bf16), S((3, 8), i32), S((3,), i32)
    f = lambda q, k, v, pt, u: attention(q, k, v, page_table=pt, seqused_k=u)  # noqa: E731
    for sq in (1, 7, 16):
        assert launches(lowered(f, S((3, sq, 8, 128), bf16), pages, pages, pt, used)) == FWD
    assert compiles() == 1


@pytest.mark.parametrize("d, dv", [(192, 128), (256, 256), (96, 96)])
def test_head_dims_lower_with_gradients(d, dv):
    q, k, v = S((1, 300, 2, d), bf16), S((1, 300, 2, d), bf16), S((1, 300, 2, dv), bf16)
    assert launches(lowered(jax.grad(grad_of(causal=True), argnums=(0, 1, 2)), q, k, v)) \
        == BWD_MHA


def test_vmap_folds_dense_with_sink_and_loops_packed():
    q, used, sink = S((3, 2, 256, 4, 64), bf16), S((3, 2), i32), S((4,), f32)
    f = lambda q, u, s: attention(q, q, q, seqused_k=u, learnable_sink=s)  # noqa: E731
    folded = launches(lowered(jax.vmap(f, in_axes=(0, 0, None)), q, used, sink))
    assert folded == FWD
    packed = lambda q, cu: attention(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu)  # noqa: E731
    loop = launches(lowered(jax.vmap(packed), S((3, 300, 4, 64), bf16), S((3, 3), i32)))
    assert loop == FWD * 3   # one launch per example: offsets are per example


def _fa4_objects(fwd_kwargs, bwd_kwargs, q, k, v):
    """FA4's own forward and backward kernel objects for sm90, captured at
    their cute.compile on fake torch tensors (nothing compiled)."""
    import cutecall
    import torch
    from fa4_capture import capture
    from flash_attn.cute import interface
    target = cutecall.current_target("sm_90a")

    def fwd(t):
        interface._flash_attn_fwd(t(*q), t(*k), t(*v), _arch=90, **fwd_kwargs(t))

    def bwd(t):
        n = q[-2]
        lse = t(*((n, q[0]) if len(q) == 3 else (q[0], n, q[1])), dtype=torch.float32)
        o = q[:-1] + v[-1:]
        interface._flash_attn_bwd(t(*q), t(*k), t(*v), t(*o), t(*o), lse, **bwd_kwargs(t))
    return capture(target, fwd)[0], capture(target, bwd)[1]


def test_kernel_objects_equal_fa4s_own():
    """The forward and backward objects for packed GQA with a causal
    sliding window and softcap equal (cutecall's content fingerprint) the
    ones FA4's interface builds for the same options."""
    import torch
    import cutecall
    from cutecall._driver.fingerprint import fingerprint
    from cutecall.attention import kernels as fk
    from cutecall.attention.checks import check
    opts = dict(causal=True, window_size=(64, None), softcap=20.0)

    def fwd_kw(t):
        cu = t(4, dtype=torch.int32)
        return dict(cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True, window_size_left=64,
                    softcap=20.0, return_lse=True)

    def bwd_kw(t):
        cu = t(4, dtype=torch.int32)
        return dict(softmax_scale=0.1, causal=True, softcap=20.0, window_size_left=64,
                    cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=100, max_seqlen_k=100)
    fa4_fwd, fa4_bwd = _fa4_objects(fwd_kw, bwd_kw, (300, 8, 128), (300, 2, 128),
                                    (300, 2, 128))
    cu = S((4,), i32)
    c = check(S((300, 8, 128), bf16), S((300, 2, 128), bf16), S((300, 2, 128), bf16),
              score_mod=None, score_mod_bwd=None, mask_mod=None, cu_seqlens_q=cu,
              cu_seqlens_k=cu, seqused_q=None, seqused_k=None, max_seqlen_q=None,
              max_seqlen_k=None, page_table=None, learnable_sink=None, aux_tensors=None,
              aux_scalars=None, scale=None, target=cutecall.current_target("sm_90a"),
              **opts).config
    assert fingerprint(fk.forward_kernel(c), "ours") == fingerprint(fa4_fwd, "ours")
    assert fingerprint(fk.backward_kernel(c), "ours") == fingerprint(fa4_bwd, "ours")
