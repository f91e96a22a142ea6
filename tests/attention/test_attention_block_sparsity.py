"""FA4's block sparsity through cutecall.attention (``block_sparse_tensors=``,
``block_sparse_tensors_bwd=``) on CPU: the kernel objects equal those FA4's
own interface builds for the same block-sparse problem on sm_90a and
sm_100a (fake tensors, nothing compiled: fa4_capture.py), ``attention``
and its gradient lower for both arches with a mask_mod -- one compile for
two sequence lengths, the tensors runtime arguments of a jitted function --
and bad tensors or unsupported combinations are ValueErrors naming them
before anything compiles. Numerics: test_gpu_flash_attention_block_sparse.py."""

import re

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall.attention import BlockSparseTensors, attention  # noqa: E402
from cutecall.attention import kernel_objects as ko  # noqa: E402
from cutecall.attention import reference as R  # noqa: E402
from cutecall.attention.checks import check  # noqa: E402
from fa4_capture import capture, differences  # noqa: E402

S = jax.ShapeDtypeStruct
bf16, i32, f32 = jnp.bfloat16, jnp.int32, jnp.float32
CAUSAL = R.prefix_lm_mask_mod(0)  # FA4's mask_mod form: q_idx >= kv_idx


def blocks(b, h, rows, cols, block, full=True) -> BlockSparseTensors:
    """Shape-only block-sparse tensors: counts (b, h, rows), indices (b, h,
    rows, cols)."""
    cnt, idx = S((b, h, rows), i32), S((b, h, rows, cols), i32)
    return BlockSparseTensors(cnt, idx, *((cnt, idx) if full else (None, None)),
                              block_size=block)


def _cdiv(a, b):
    return -(-a // b)


def problem(batch, seqlen, heads, heads_kv, hdim, fwd_block, bwd_block, sparse_heads):
    q, kv = (batch, seqlen, heads, hdim), (batch, seqlen, heads_kv, hdim)
    m, n = _cdiv(seqlen, fwd_block[0]), _cdiv(seqlen, fwd_block[1])
    fwd = blocks(batch, sparse_heads, m, n, fwd_block)
    n_b, m_b = _cdiv(seqlen, bwd_block[1]), _cdiv(seqlen, bwd_block[0])
    bwd = blocks(1, sparse_heads, n_b, m_b, bwd_block, full=False)
    return q, kv, fwd, bwd


def _fa4_tensors(t, spec: BlockSparseTensors):
    """FA4's BlockSparseTensorsTorch of fake CUDA tensors (FA4 checks the
    device) with the spec's shapes."""
    import torch
    from flash_attn.cute.block_sparsity import BlockSparseTensorsTorch
    from torch._subclasses.fake_tensor import FakeTensor
    mode = t(1).fake_mode

    def fake(x):
        return None if x is None else FakeTensor(
            mode, torch.empty(x.shape, dtype=torch.int32, device="meta"), torch.device("cuda", 0))
    arrays = (spec.mask_block_cnt, spec.mask_block_idx, spec.full_block_cnt, spec.full_block_idx)
    return BlockSparseTensorsTorch(*map(fake, arrays), block_size=spec.block_size)


def fa4_objects(target, q, kv, fwd_bs, bwd_bs) -> tuple:
    import torch
    from flash_attn.cute import interface
    arch = int(target.arch.removeprefix("sm_").rstrip("a"))

    def fwd(t):
        interface._flash_attn_fwd(t(*q), t(*kv), t(*kv), return_lse=True, _arch=arch,
                                  mask_mod=CAUSAL, block_sparse_tensors=_fa4_tensors(t, fwd_bs))

    def bwd(t):
        o, lse = t(*q), t(q[0], q[2], q[1], dtype=torch.float32)
        interface._flash_attn_bwd(t(*q), t(*kv), t(*kv), o, o, lse, softmax_scale=0.1,
                                  mask_mod=CAUSAL, block_sparse_tensors=_fa4_tensors(t, bwd_bs))
    return capture(target, fwd), capture(target, bwd)


def ours(target, q, kv, fwd_bs, bwd_bs) -> tuple:
    c = check(S(q, bf16), S(kv, bf16), S(kv, bf16), causal=False, window_size=(None, None),
              softcap=0.0, score_mod=None, score_mod_bwd=None, mask_mod=CAUSAL,
              cu_seqlens_q=None, cu_seqlens_k=None, seqused_q=None, seqused_k=None,
              max_seqlen_q=None, max_seqlen_k=None, page_table=None, learnable_sink=None,
              aux_tensors=None, aux_scalars=None, scale=None, target=target,
              block_sparse_tensors=fwd_bs, block_sparse_tensors_bwd=bwd_bs).config
    bwd = [ko.preprocess_kernel(c), ko.backward_kernel(c), ko.postprocess_kernel(c, "dq")]
    if c.qhead_per_kvhead > 1:
        bwd.append(ko.postprocess_kernel(c, "dkv"))
    # FA4 compiles a postprocess once where two have one compile key
    unique = [x for i, x in enumerate(bwd) if not any(differences(x, y) == {}
                                                      for y in bwd[:i])]
    return [ko.forward_kernel(c)], unique, c


@pytest.mark.parametrize("arch, shape, fwd_block, bwd_block, sparse_heads, want", [
    # sm90 d128: 128x128 tiles; q blocks of 256 are two tiles (q_subtile_factor 2)
    ("sm_90a", (2, 512, 4, 4, 128), (128, 128), (128, 128), 1, dict(pack_gqa=None)),
    ("sm_90a", (2, 512, 4, 4, 128), (256, 128), (256, 128), 4, dict(pack_gqa=None)),
    # sm90 d64 GQA, per-head masks: FA4 drops PackGQA; 192-row tiles shrink to 128
    ("sm_90a", (1, 512, 8, 2, 64), (256, 128), (128, 128), 8, dict(pack_gqa=False)),
    # sm100 prefill (q_stage 2): q blocks of 256; kv blocks of 256 (kv_subtile 2) keep
    # the backward's 2-CTA, 128 turn it off; no 2-CTA forward, no S ping-pong
    ("sm_100a", (2, 512, 4, 4, 128), (256, 256), (256, 256), 1,
     dict(q_stage=2, two_cta=False, bwd_2cta=True)),
    ("sm_100a", (1, 512, 8, 2, 128), (256, 128), (128, 128), 1,
     dict(pack_gqa=True, two_cta=False, bwd_2cta=False)),
    ("sm_100a", (1, 512, 8, 2, 128), (512, 128), (128, 128), 8,
     dict(pack_gqa=False, s_ping_pong=False)),
])
def test_kernel_objects_are_fas(arch, shape, fwd_block, bwd_block, sparse_heads, want):
    """Attribute for attribute what FA4's ``_flash_attn_fwd`` /
    ``_flash_attn_bwd`` build with ``block_sparse_tensors`` (and the
    Config's choices FA4 makes for block sparsity)."""
    target = cutecall.current_target(arch)
    b, s, h, hkv, d = shape
    q, kv, fwd_bs, bwd_bs = problem(b, s, h, hkv, d, fwd_block, bwd_block, sparse_heads)
    theirs = fa4_objects(target, q, kv, fwd_bs, bwd_bs)
    fwd, bwd, c = ours(target, q, kv, fwd_bs, bwd_bs)
    for what, a, t in (("forward", fwd, theirs[0]), ("backward", bwd, theirs[1])):
        assert [type(x).__name__ for x in a] == [type(x).__name__ for x in t], what
        for x, y in zip(a, t):
            assert differences(x, y) == {}, (what, type(x).__name__)
    assert {k: getattr(c, k) for k in want} == want


def lowered(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def launches(text: str) -> list:
    return sorted(re.sub(r"_(bfloat16|float16)_.*", "", n)
                  for n in re.findall(r'kernel = "([^"]+)"', text))


def _grad(q, k, v, fwd_bs, bwd_bs):
    def loss(q, k, v, f, b):
        return attention(q, k, v, mask_mod=CAUSAL, block_sparse_tensors=f,
                         block_sparse_tensors_bwd=b).astype(f32).sum()
    return launches(lowered(jax.grad(loss, argnums=(0, 1, 2)), q, k, v, fwd_bs, bwd_bs))


@pytest.mark.parametrize("arch, block", [("sm_90a", (128, 128)), ("sm_100a", (256, 128))])
def test_gradient_lowers_once_for_every_length(monkeypatch, compiles, arch, block):
    """Forward and backward with block sparsity + a causal mask_mod lower
    for the arch; the tensors are arguments of the jitted function (a
    pytree; block_size its static part) and another sequence length and
    batch compile nothing."""
    monkeypatch.setenv("CUTECALL_ARCH", arch)
    want = ["fa4_bwd", "fa4_bwd_postprocess_dq", "fa4_bwd_preprocess", "fa4_fwd"]
    for b, s in ((2, 512), (3, 1024)):
        q, kv, fwd_bs, bwd_bs = problem(b, s, 4, 4, 128, block, block, 1)
        assert _grad(S(q, bf16), S(kv, bf16), S(kv, bf16), fwd_bs, bwd_bs) == want
        assert compiles() == 4


Q, KV = S((2, 512, 4, 128), bf16), S((2, 512, 4, 128), bf16)


@pytest.mark.parametrize("arch, kwargs, message", [
    ("sm_90a", dict(block_sparse_tensors=(1, 2)),
     "block_sparse_tensors must be a cutecall.attention.BlockSparseTensors, got tuple"),
    ("sm_90a", dict(block_sparse_tensors=BlockSparseTensors(
        S((2, 1, 4), f32), S((2, 1, 4, 4), i32))),
     "block_sparse_tensors.mask_block_cnt must be int32 of rank 3, got float32 (2, 1, 4)"),
    ("sm_90a", dict(block_sparse_tensors=blocks(2, 1, 4, 4, (128, 0))),
     "block_sparse_tensors.block_size must be a pair of Python ints > 0 (q, kv), "
     "got (128, 0)"),
    ("sm_90a", dict(block_sparse_tensors=blocks(2, 1, 3, 4, (128, 128))),
     "block_sparse_tensors.mask_block_cnt/mask_block_idx must be (B|1, H|1, 4) and "
     "(B|1, H|1, 4, <= 4) with B = 2, H = 4, got (2, 1, 3) and (2, 1, 3, 4)"),
    ("sm_90a", dict(block_sparse_tensors=blocks(2, 1, 4, 2, (128, 256))),
     "block_sparse_tensors.block_size[1]=256: FA4's sm90 forward needs it to equal its "
     "tile_n=128"),
    ("sm_100a", dict(block_sparse_tensors=blocks(2, 1, 4, 4, (128, 128))),
     "block_sparse_tensors.block_size[0]=128: FA4's sm100 forward needs a multiple of 256"),
    ("sm_90a", dict(block_sparse_tensors_bwd=blocks(2, 1, 4, 6, (96, 128))),
     "block_sparse_tensors_bwd.block_size[0]=96: FA4's sm90 backward needs a multiple of "
     "its tile_m=64"),
    ("sm_120a", dict(block_sparse_tensors=blocks(2, 1, 4, 4, (128, 128))),
     "block_sparse_tensors on sm_120a (FA4's sm120 forward): FA4 runs block sparsity on "
     "sm90 and sm100/sm103 only"),
    ("sm_90a", dict(block_sparse_tensors=blocks(2, 1, 4, 4, (128, 128)),
                    seqused_k=S((2,), i32)),
     "block_sparse_tensors with seqused_k: cutecall runs FA4's block sparsity on dense"),
])
def test_bad_block_sparsity_raises_naming_it(monkeypatch, compiles, arch, kwargs, message):
    monkeypatch.setenv("CUTECALL_ARCH", arch)
    with pytest.raises(ValueError, match=re.escape(message)):
        jax.eval_shape(lambda q, k, v: attention(q, k, v, mask_mod=CAUSAL, **kwargs), Q, KV, KV)
    assert compiles() == 0


def test_a_backward_fa4_lacks_raises_when_differentiated(monkeypatch, compiles):
    """sm100's dedicated hd256 backward has no block sparsity (FA4 asserts
    it): the forward runs, grad names the option and the arch."""
    monkeypatch.setenv("CUTECALL_ARCH", "sm_100a")
    q = S((1, 512, 2, 256), bf16)
    bs = blocks(1, 1, 4, 4, (128, 128))  # hd256: one Q tile per CTA

    def loss(q, k, v, bs):  # no mask_mod: the dedicated kernel lacks that too
        return attention(q, k, v, block_sparse_tensors=bs,
                         block_sparse_tensors_bwd=bs).astype(f32).sum()
    with pytest.raises(ValueError, match=re.escape(
            "block_sparse_tensors_bwd with head dim 256 on sm_100a (FA4's dedicated hd256 "
            "backward): not supported")):
        jax.eval_shape(jax.grad(loss), q, q, q, bs)
    assert compiles() == 0
