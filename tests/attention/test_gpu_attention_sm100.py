"""cutecall.attention on Blackwell (B200/GB200 sm_100, B300 sm_103): FA4's
sm100 kernels through cutecall against FA4's own torch path
(``flash_attn.cute.flash_attn_func`` / ``flash_attn_varlen_func``) on the
same inputs -- the forward's outputs bit for bit (the same kernel objects:
2-CTA MMA launched as clusters of 2, the persistent and LPT schedulers, Q
stages, split-KV and its combine), the gradients within bf16 rounding (dQ
accumulates with atomics) -- and against the float32 reference
(``attention_checks.check``) for what FA4's torch path takes differently
(paged KV with split-KV, packed sequences, sinks).

Skips unless GPU 0 is an sm_100/sm_103 device."""

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")
torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from attention_checks import assert_close, bf16, check, normal  # noqa: E402
from cutecall import _core  # noqa: E402
from cutecall.attention import attention  # noqa: E402

BLACKWELL = _core.device_arch(0) in ("sm_100a", "sm_103a")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not BLACKWELL, reason=f"needs an sm_100/sm_103 GPU (GPU 0: {_core.device_arch(0)})")]


def to_torch(a, grad=False):
    """The same bits as a CUDA tensor."""
    if a.dtype == jnp.bfloat16:
        t = torch.from_numpy(np.asarray(a).view(np.int16).copy()).cuda().view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.asarray(a).copy()).cuda()
    return t.requires_grad_(grad)


def from_torch(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return jnp.asarray(t.view(torch.int16).numpy().view(jnp.bfloat16))
    return jnp.asarray(t.numpy())


def ours(q, k, v, do, **kw):
    """(o, lse, dq, dk, dv) of cutecall.attention under jit (the gradients
    of o alone, as FA4's path takes them: no LSE cotangent)."""
    o, lse = jax.jit(lambda q, k, v: attention(q, k, v, return_lse=True, **kw))(q, k, v)
    _, vjp = jax.vjp(jax.jit(lambda q, k, v: attention(q, k, v, **kw)), q, k, v)
    return (o, lse) + tuple(vjp(do))


def fa4s(q, k, v, do, **kw):
    """(o, lse, dq, dk, dv) of FA4's flash_attn_func on the same bits."""
    from flash_attn.cute import flash_attn_func
    tq, tk, tv = (to_torch(x, grad=True) for x in (q, k, v))
    o, lse = flash_attn_func(tq, tk, tv, return_lse=True, **kw)
    o.backward(to_torch(do))
    torch.cuda.synchronize()
    return tuple(from_torch(t) for t in (o, lse, tq.grad, tk.grad, tv.grad))


def same_bits(a, b, name):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape, (name, a.shape, b.shape)
    assert np.array_equal(a, b, equal_nan=True), \
        f"{name}: {np.sum(a != b)} elements differ, max {np.nanmax(np.abs(a - b)):.3g}"


CASES = [  # (B, Sq, Sk, H, Hkv, D, causal): what FA4 picks on a B200
    (2, 1000, 1000, 8, 2, 128, False),   # 2-CTA forward (static persistent) and backward
    (2, 777, 777, 4, 4, 64, True),       # 2 Q stages, LPT scheduler, 1-CTA backward
    (1, 513, 513, 4, 4, 256, True),      # hd256: 2-CTA forward, dedicated backward
    (2, 64, 4096, 2, 2, 128, True),      # one Q stage, S ping-pong
    (2, 300, 1000, 8, 1, 192, False),    # MQA, hd 192 on 2-CTA
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_forward_bitwise_and_gradients_close_to_fa4s_own(case):
    b, sq, sk, h, hkv, d, causal = case
    dv = 128 if d == 192 else d
    q, k = normal(0, (b, sq, h, d), bf16), normal(1, (b, sk, hkv, d), bf16)
    v, do = normal(2, (b, sk, hkv, dv), bf16), normal(3, (b, sq, h, dv), bf16)
    got, want = ours(q, k, v, do, causal=causal), fa4s(q, k, v, do, causal=causal)
    same_bits(got[0], want[0], "o")
    same_bits(got[1], want[1], "lse")
    for name, g, w in zip(("dq", "dk", "dv"), got[2:], want[2:]):
        assert_close(g, w, f"{name} vs FA4's")


@pytest.mark.parametrize("num_splits", [0, 3])   # FA4's heuristic (148 SMs), three splits
def test_split_kv_decode_bitwise_to_fa4s_own(num_splits):
    q, do = normal(0, (4, 1, 8, 128), bf16), normal(3, (4, 1, 8, 128), bf16)
    k, v = normal(1, (4, 8192, 2, 128), bf16), normal(2, (4, 8192, 2, 128), bf16)
    got = ours(q, k, v, do, causal=True, num_splits=num_splits)
    want = fa4s(q, k, v, do, causal=True, num_splits=num_splits)
    same_bits(got[0], want[0], "o")
    same_bits(got[1], want[1], "lse")
    check(q, k, v, causal=True, num_splits=num_splits)


@pytest.mark.parametrize("page_size", [128, 64])  # TMA pages (2-CTA off), cp.async pages
def test_paged_split_kv_decode(page_size):
    from cutecall.attention import reference as R
    b, hkv, d, pages_per_seq = 3, 2, 128, 16
    used = np.array([1, page_size * 5 + 3, page_size * pages_per_seq], np.int32)
    pool = 2 * b * pages_per_seq
    table = np.random.default_rng(0).permutation(pool)[: b * pages_per_seq]
    table = table.reshape(b, pages_per_seq).astype(np.int32)
    k, v = normal(1, (pool, page_size, hkv, d), bf16), normal(2, (pool, page_size, hkv, d), bf16)
    q = normal(0, (b, 4, 8, d), bf16)
    for splits in (1, 0):
        o, lse = jax.jit(lambda q, k, v, t, u: attention(
            q, k, v, page_table=t, seqused_k=u, causal=True, return_lse=True,
            num_splits=splits))(q, k, v, jnp.asarray(table), jnp.asarray(used))
        wo, wlse = R.reference(q, k, v, page_table=table, seqused_k=used, causal=True)
        assert_close(o, wo, f"o (num_splits={splits})")
        assert_close(lse, wlse, f"lse (num_splits={splits})")


def test_packed_gqa_window_softcap_and_sinks_against_the_reference():
    lengths = [1, 129, 387]
    cu = jnp.asarray(np.concatenate([[0], np.cumsum(lengths)]), jnp.int32)
    total = int(cu[-1])
    q = normal(0, (total, 8, 192), bf16)
    k, v = normal(1, (total, 2, 192), bf16), normal(2, (total, 2, 128), bf16)
    check(q, k, v, causal=True, window_size=(64, None), softcap=20.0, cu_seqlens_q=cu,
          cu_seqlens_k=cu, max_seqlen_q=max(lengths))
    x = normal(3, (2, 300, 4, 128), bf16)
    check(x, x, x, learnable_sink=normal(4, (4,), jnp.float32))
