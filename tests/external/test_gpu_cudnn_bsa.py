"""cuDNN frontend's Hopper block-sparse attention forward
(``corpus.cudnn_bsa_corpus``) on a GPU: cuDNN's kernel object through
cutecall's torch front (cuDNN's permuted views) and JAX front (BHSD arrays,
``TensorSpec(mode=...)``; eager and in ``jax.jit``), with no output names,
against a dense masked attention in float32 and, bit for bit, against
cuDNN's own compiled kernel on the same inputs (deterministic: one CTA per
query block, no split-KV); its backward through the torch front; and
``cutecall.attention.block_sparse_attention`` (forward, CSR builder and
backward from JAX, under ``jax.grad``) against cuDNN's torch path. An sm90
GPU only (H100/H200)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cudnn.block_sparse_attention.csrc.fwd.sm90_blk128.bsa_fwd_sm90")

from authors_checks import check_against_authors  # noqa: E402
from corpus import cudnn_bsa_corpus as bsa  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(autouse=True)
def hopper():
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("cuDNN's sm90 block-sparse kernel runs on sm_90 only")


@pytest.mark.parametrize("shape", [bsa.SHAPES["test"]["bsa_fwd_sm90"], (2, 4, 1024, 128, 3)],
                         ids=["test", "batch2_count3"])
def test_bsa_forward_matches_cudnn_bit_for_bit(shape):
    check_against_authors(bsa.case(*shape), bsa.jax_args_from_torch,
                          as_jax_layout=bsa.as_jax_layout)


def test_bsa_backward_torch_matches_cudnn():
    # cuDNN's sm90 backward kernel object through cutecall's torch front
    # (outputs found: dQ, dK, dV, workspace), its CSR and workspace made by
    # cuDNN's helpers, against cuDNN's _bsa_attn_bwd_sm90_blk128 on the same
    # inputs. dQ accumulates in float32 across key blocks (atomics): equal
    # within bf16 rounding, not bit for bit.
    import importlib

    import cutecall.torch
    from cutecall.attention.block_sparse_kernels import backward_kernel
    from corpus_checks import assert_close
    b, h, s, d, count = bsa.SHAPES["test"]["bsa_fwd_sm90"]
    args, groups = bsa.backward_args(b, h, s, d, count, "cuda")
    k = cutecall.torch.kernel(backward_kernel(d, groups), outputs=4)
    k(*args)
    assert k.output_params == ["mdQ", "mdK", "mdV", "workspace"]
    _, do, o, q, kk, v, lse = args[:7]
    interface = importlib.import_module(bsa.INTERFACE)
    idx = bsa._indices(b, h, s // bsa.BLOCK, count, torch, dtype=torch.int32,
                       device="cuda").contiguous()
    want = interface._bsa_attn_bwd_sm90_blk128(do, q, kk, v, o, lse, idx, count)
    case = bsa.cases("test")[0]
    for got, w, name in zip(args[7:10], want, ("dQ", "dK", "dV")):
        assert torch.isfinite(got).all(), name
        assert_close(got, w, case, f"backward {name} vs cuDNN")


# cutecall.attention.block_sparse_attention: cuDNN's sm90 forward, CSR
# builder and backward from JAX (jax.grad), against cuDNN's torch path
# (_bsa_attn_fwd_sm90_blk128, _bsa_attn_bwd_sm90_blk128) on the same inputs.
# (b, h, s, count, layout, dtype, bucket): bucket 2 with 4+ query blocks puts
# them in several buckets, so dK/dV accumulate in the zeroed workspace.
JAX_CASES = {
    "bhsd": (1, 2, 512, 2, "bhsd", "bfloat16", None),
    "batch2_count3": (2, 4, 1024, 3, "bhsd", "bfloat16", None),
    "bshd_fp16": (2, 2, 512, 2, "bshd", "float16", None),
    "buckets": (1, 2, 1024, 3, "bhsd", "bfloat16", 2),
}


def _jax_and_cudnn(b, h, s, count, layout, dtype, bucket):
    """(ours, cuDNN's): each (o, lse, dq, dk, dv), o and grads in `layout`."""
    import importlib

    import jax
    import jax.numpy as jnp

    from cutecall.attention import block_sparse_attention
    interface = importlib.import_module(bsa.INTERFACE)
    d, scale = 128, 0.1
    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
    q, k, v, do = (torch.randn(shape, generator=gen, device="cuda").to(tdtype)
                   for _ in range(4))
    idx = bsa._indices(b, h, s // bsa.BLOCK, count, torch, dtype=torch.int32,
                       device="cuda").contiguous()
    o_t, lse_t = interface._bsa_attn_fwd_sm90_blk128(q, k, v, idx, count, scale=scale,
                                                     layout=layout)
    bh = (lambda t: t) if layout == "bhsd" else (lambda t: t.transpose(1, 2))
    grads_t = interface._bsa_attn_bwd_sm90_blk128(
        bh(do), bh(q), bh(k), bh(v), bh(o_t), lse_t, idx, count, scale=scale,
        bucket=bucket)
    torch.cuda.synchronize()
    theirs = (o_t, lse_t) + tuple(bh(g) for g in grads_t)

    def as_jax(t):
        return jnp.from_dlpack(t.detach().clone().contiguous())
    jq, jk, jv, jdo, jidx = map(as_jax, (q, k, v, do, idx))

    def attend(q, k, v):
        return block_sparse_attention(q, k, v, jidx, count, scale=scale, layout=layout,
                                      bucket_size_blocks=bucket)

    def loss(q, k, v):  # d loss / d o = do exactly (do is already q's dtype)
        return (attend(q, k, v).astype(jnp.float32) * jdo.astype(jnp.float32)).sum()
    o = jax.jit(attend)(jq, jk, jv)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(jq, jk, jv)
    from cutecall.attention.block_sparse import _check
    from cutecall.attention.block_sparse_kernels import forward
    c, _ = _check(jq, jk, jv, jidx, count, scale, layout, bucket)
    _, lse = forward(c)(jq, jk, jv, jidx, scale)
    return (o, lse) + tuple(grads), theirs


@pytest.mark.parametrize("config", list(JAX_CASES.values()), ids=list(JAX_CASES))
def test_bsa_jax_grad_matches_cudnn(config):
    # Forward: one CTA per query block, no split-KV: bit for bit. Backward:
    # dQ accumulates in float32 with atomics across key blocks, and the CSR
    # that orders each key block's query blocks is filled by atomics, so dK/dV
    # sum in a run-dependent order too (and, with several buckets, with
    # atomics): equal within bf16/fp16 rounding, not bit for bit.
    from types import SimpleNamespace

    from corpus_checks import assert_close, assert_same
    ours, theirs = _jax_and_cudnn(*config)
    case = SimpleNamespace(name=f"block_sparse_attention{config}", atol=2e-2, rtol=2e-2)
    for name, got, want in zip(("o", "lse"), ours[:2], theirs[:2]):
        assert_same(got, want, case, f"forward {name} vs cuDNN")
    for name, got, want in zip(("dq", "dk", "dv"), ours[2:], theirs[2:]):
        assert_close(got, want, case, f"{name} vs cuDNN")


def test_bsa_jax_grad_matches_dense_reference():
    # The gradients against jax.grad of a dense masked attention in float32.
    import jax
    import jax.numpy as jnp

    from cutecall.attention import block_sparse_attention
    b, h, s, d, count = 1, 2, 512, 128, 2
    keys = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(key, (b, h, s, d), jnp.float32).astype(jnp.bfloat16)
               for key in keys)
    idx = jnp.asarray(bsa._indices(b, h, s // bsa.BLOCK, count, jnp, dtype=jnp.int32))
    mask = bsa._block_mask(idx, s, jnp)

    def dense(q, k, v):
        logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) * d ** -0.5
        p = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v)

    def loss(f, *args):
        return f(*args).astype(jnp.float32).sum()
    ours = jax.grad(lambda *a: loss(lambda q, k, v: block_sparse_attention(
        q, k, v, idx, count), *a), argnums=(0, 1, 2))(q, k, v)
    f32 = [x.astype(jnp.float32) for x in (q, k, v)]
    want = jax.grad(lambda *a: loss(dense, *a), argnums=(0, 1, 2))(*f32)
    for name, g, w in zip(("dq", "dk", "dv"), ours, want):
        np.testing.assert_allclose(np.asarray(g.astype(jnp.float32)), np.asarray(w),
                                   atol=1e-2, rtol=2e-2, err_msg=name)
