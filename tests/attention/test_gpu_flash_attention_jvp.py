"""Forward mode of FA4 attention on a GPU (flash_attention_jvp wired into
FA4's differentiable attention): jax.jvp against the float32 reference for
MHA, GQA and MQA, causal (bottom-right aligned when Sq < Sk) and not, head
dims 64 and 128, bfloat16 and float16, lengths that are no multiple of a
tile; jax.linearize equals jax.jvp; jax.jacfwd of a tiny case against the
reference's; and forward and reverse mode agree: <J t, u> = <t, J^T u>
(check_grads is not usable with bf16 kernels).

Tolerance ("within bf16 tolerance"): the largest error against the float32
reference is at most twice that of XLA's own attention run in the inputs'
dtype, plus an absolute floor of 2e-3 times the tangent's scale."""

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall.attention as fa  # noqa: E402
from cutecall.attention import jvp as fj  # noqa: E402
from cutecall.attention import reference as fr  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")]

CASES = [  # B, Sq, Sk, H, Hkv, D, dtype, causal
    (2, 1000, 1000, 4, 4, 128, jnp.bfloat16, False),
    (2, 1000, 1000, 4, 4, 128, jnp.bfloat16, True),
    (1, 777, 777, 8, 2, 64, jnp.float16, True),
    (2, 300, 1000, 8, 1, 128, jnp.bfloat16, True),
    (2, 513, 513, 4, 2, 64, jnp.bfloat16, False),
]


def attention_with_jvp(h, hkv, d, dtype, causal):
    """attention(q, k, v): FA4's backward as its vjp, the forward-mode rule
    as its jvp."""
    return (lambda q, k, v: fa.attention(q, k, v, causal=causal)), d ** -0.5


def reference(scale, causal, lowp=False):
    """The float32 reference; lowp: XLA's attention in the inputs' dtype."""
    def f(q, k, v):
        mask = fj.dense_mask(q.shape[1], k.shape[1], causal=causal)
        if lowp:
            m = None if mask is None else mask(jnp.arange(q.shape[1])[:, None],
                                               jnp.arange(k.shape[1])[None, :])[None, None]
            return jax.nn.dot_product_attention(q, k, v, mask=m, scale=scale)
        return fr.reference_attention(q, k, v, scale=scale, mask=mask)[0]
    return f


def problem(b, sq, sk, h, hkv, d, dtype, seed=0):
    keys = jax.random.split(jax.random.key(seed), 6)
    shapes = [(b, sq, h, d), (b, sk, hkv, d), (b, sk, hkv, d)] * 2
    xs = [jax.random.normal(k, s, jnp.float32).astype(dtype) for k, s in zip(keys, shapes)]
    return tuple(xs[:3]), tuple(xs[3:])


def assert_close(got, want, lowp, name):
    got, want, lowp = (np.asarray(x, np.float32) for x in (got, want, lowp))
    err, floor = np.abs(got - want).max(), np.abs(lowp - want).max()
    assert np.isfinite(got).all(), f"{name}: non-finite values"
    bound = 2 * floor + 2e-3 * max(1.0, np.abs(want).max())
    assert err <= bound, f"{name}: max error {err:.3g} vs XLA's {floor:.3g}"


def upcast(xs):
    return tuple(x.astype(jnp.float32) for x in xs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(
    str(x.__name__ if hasattr(x, "__name__") else x) for x in c))
def test_jvp_matches_the_float32_reference(case):
    b, sq, sk, h, hkv, d, dtype, causal = case
    f, scale = attention_with_jvp(h, hkv, d, dtype, causal)
    primals, tangents = problem(b, sq, sk, h, hkv, d, dtype)
    o, o_dot = jax.jit(lambda p, t: jax.jvp(f, p, t))(primals, tangents)
    assert o.dtype == o_dot.dtype == dtype
    want_o, want = jax.jit(lambda p, t: jax.jvp(reference(scale, causal), p, t))(
        upcast(primals), upcast(tangents))
    low_o, low = jax.jit(lambda p, t: jax.jvp(reference(scale, causal, lowp=True), p, t))(
        primals, tangents)
    assert_close(o, want_o, low_o, "o")
    assert_close(o_dot, want, low, "o_dot")


def test_linearize_equals_jvp():
    f, _ = attention_with_jvp(8, 2, 64, jnp.bfloat16, True)
    primals, tangents = problem(2, 384, 384, 8, 2, 64, jnp.bfloat16, seed=1)
    _, o_dot = jax.jit(lambda p, t: jax.jvp(f, p, t))(primals, tangents)
    _, lin = jax.linearize(f, *primals)
    np.testing.assert_allclose(np.asarray(jax.jit(lin)(*tangents), np.float32),
                               np.asarray(o_dot, np.float32), rtol=1e-2, atol=1e-2)


def test_jacfwd_of_a_tiny_case_matches_the_reference():
    """B1 S16 H2 D64: jacfwd pushes 2048 tangents through one vmapped jvp
    (FA4's forward folds them into its batch)."""
    f, scale = attention_with_jvp(2, 2, 64, jnp.bfloat16, True)
    primals, _ = problem(1, 16, 16, 2, 2, 64, jnp.bfloat16, seed=2)
    got = jax.jit(jax.jacfwd(f, argnums=(0, 1, 2)))(*primals)
    want = jax.jit(jax.jacfwd(reference(scale, True), argnums=(0, 1, 2)))(*upcast(primals))
    low = jax.jit(jax.jacfwd(reference(scale, True, lowp=True), argnums=(0, 1, 2)))(*primals)
    for name, g, w, l in zip(("d/dq", "d/dk", "d/dv"), got, want, low):
        assert g.shape == (1, 16, 2, 64) * 2, name
        assert_close(g, w, l, name)


@pytest.mark.parametrize("h, hkv, causal", [(8, 2, True), (4, 4, False)])
def test_forward_and_reverse_mode_agree(h, hkv, causal):
    """<J t, u> = <t, J^T u> with u = J t (so the product is large against
    bf16 rounding): jvp (the tangent rule) against vjp (FA4's backward)."""
    f, _ = attention_with_jvp(h, hkv, 64, jnp.bfloat16, causal)
    primals, tangents = problem(2, 512, 512, h, hkv, 64, jnp.bfloat16, seed=3)
    _, o_dot = jax.jit(lambda p, t: jax.jvp(f, p, t))(primals, tangents)
    cotangents = jax.jit(lambda p, u: jax.vjp(f, *p)[1](u))(primals, o_dot)
    forward = float(jnp.vdot(o_dot.astype(jnp.float32), o_dot.astype(jnp.float32)))
    reverse = sum(float(jnp.vdot(t.astype(jnp.float32), c.astype(jnp.float32)))
                  for t, c in zip(tangents, cotangents))
    assert forward > 0
    assert abs(forward - reverse) <= 1e-2 * forward, (forward, reverse)


def wired(q, k, v, return_lse=False, learnable_sink=None, **options):
    """attention(q, k, v, **options) as a function of (q, k, v, sink) (the
    given learnable_sink only says whether there is one)."""
    return q.shape[-1] ** -0.5, lambda q, k, v, sink: fa.attention(
        q, k, v, learnable_sink=sink, return_lse=return_lse, **options)


OPTIONS = {  # name: (lengths q, lengths k (packed) or None (dense B=2, S=700), options)
    "window-64-32": (None, None, dict(window_size=(64, 32))),
    "causal-window-100": (None, None, dict(causal=True, window_size=(100, 0))),
    "softcap-2": (None, None, dict(softcap=2.0, causal=True)),
    "sink": (None, None, dict(causal=True, sink=True)),
    "varlen-causal": ([5, 300, 129], [77, 300, 500], dict(causal=True)),
    "varlen-window-sink": ([200, 33], [200, 90], dict(window_size=(40, 8), sink=True)),
}


@pytest.mark.parametrize("name", OPTIONS)
def test_jvp_with_attention_options_matches_the_float32_reference(name):
    """o, lse and their tangents (sink's included) for windows, softcap,
    learnable sinks and packed varlen, against the float32 reference with
    the same mask, softcap and sink: a check of the rule's masks against
    FA4's too. Tolerance: 2e-2 of the reference's scale (bf16 P in FA4)."""
    lq, lk, options = OPTIONS[name]
    options = dict(options)
    h, hkv, d = 8, 2, 128
    with_sink = options.pop("sink", False)
    if lq is None:
        shapes = [(2, 700, h, d), (2, 700, hkv, d), (2, 700, hkv, d)]
    else:
        cu = [jnp.asarray(np.cumsum([0] + n), jnp.int32) for n in (lq, lk)]
        options.update(cu_seqlens_q=cu[0], cu_seqlens_k=cu[1])
        shapes = [(sum(lq), h, d), (sum(lk), hkv, d), (sum(lk), hkv, d)]
    keys = jax.random.split(jax.random.key(7), 8)
    primals = [jax.random.normal(kk, s).astype(jnp.bfloat16) for kk, s in zip(keys, shapes)]
    tangents = [jax.random.normal(kk, s).astype(jnp.bfloat16) for kk, s in zip(keys[3:], shapes)]
    sink = 0.5 * jax.random.normal(keys[6], (h,)) if with_sink else None
    sink_dot = jax.random.normal(keys[7], (h,)) if with_sink else None
    scale, f = wired(*primals, return_lse=True, learnable_sink=sink, **options)
    (o, lse), (o_dot, lse_dot) = jax.jit(lambda p, t: jax.jvp(f, p, t))(
        (*primals, sink), (*tangents, sink_dot))

    def reference(q, k, v, s):
        if lq is None:
            mask = fj.dense_mask(q.shape[1], k.shape[1], causal=options.get("causal", False),
                                 window_size=options.get("window_size", (None, None)))
        else:
            mask = fj.varlen_mask(options["cu_seqlens_q"], options["cu_seqlens_k"],
                                  causal=options.get("causal", False),
                                  window_size=options.get("window_size", (None, None)))
        softcap = options.get("softcap", 0.0)
        return fr.reference_attention(
            q, k, v, scale=scale, mask=mask, sink=s,
            score=fj.softcap_score(softcap) if softcap else fj.identity_score)
    (wo, wlse), (wo_dot, wlse_dot) = jax.jit(lambda p, t: jax.jvp(reference, p, t))(
        (*upcast(primals), sink), (*upcast(tangents), sink_dot))
    for got, want, what in ((o, wo, "o"), (o_dot, wo_dot, "o_dot"), (lse, wlse, "lse"),
                            (lse_dot, wlse_dot, "lse_dot")):
        got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
        finite = np.isfinite(want)
        assert (np.isfinite(got) == finite).all(), what
        err = np.abs(got[finite] - want[finite]).max()
        assert err <= 2e-2 * max(1.0, np.abs(want[finite]).max()), f"{what}: max error {err:.3g}"
