"""Forward mode of FA4 attention (cutecall.attention.jvp) on
CPU. The rule with a pure-JAX forward in place of FA4's kernel equals
jax.jvp of a float32 reference attention (float32 inputs, tight tolerance)
for MHA/GQA/MQA, causal with Sq < Sk and Sq > Sk (rows with no key), sliding
windows, softcap, packed varlen, seqused and learnable sinks (their tangent
too); layouts XLA does not express raise naming the option; wired into cutecall.differentiable it
serves jvp, linearize and jacfwd while grad runs the backward rule. With
FA4's real kernels, jvp and linearize lower for cuda with the forward kernel
only (one compile serves v and its tangent), and grad still lowers through
FA4's backward kernels."""

import re

import numpy as np
import pytest

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall.attention import jvp as fj  # noqa: E402
from cutecall.attention import reference as fr  # noqa: E402
from cutecall.attention import Config  # noqa: E402

# Float32 numerics at 2e-5 (CPU tests): on the CPU device on a GPU host too.
pytestmark = pytest.mark.usefixtures("cpu_numerics")


def normal(seed, *shapes):
    keys = jax.random.split(jax.random.key(seed), len(shapes))
    return [jax.random.normal(k, s, jnp.float32) for k, s in zip(keys, shapes)]


def problem(b, sq, sk, h, hkv, d, seed=0):
    """Primals (q, k, v) and tangents (q', k', v')."""
    q, k, v, dq, dk, dv = normal(seed, *[(b, sq, h, d), (b, sk, hkv, d), (b, sk, hkv, d)] * 2)
    return (q, k, v), (dq, dk, dv)


def pure_jax_rule(causal, window, softcap, scale, block_k, h, hkv, d, **kw):
    """The rule with the float32 reference as its forward, and that forward."""
    score = fj.softcap_score(softcap) if softcap else fj.identity_score

    def forward(q, k, v, *extra):
        mask = fj.dense_mask(q.shape[1], k.shape[1], causal=causal, window_size=window)
        return fr.reference_attention(q, k, v, scale=scale, mask=mask, score=score)
    c = Config("float32", d, h // hkv, causal, softcap=softcap)
    return fj.jvp_rule(c, scale, window_size=window, forward=forward,
                       block_k=block_k, **kw), forward


def close(got, want, tol=2e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


CASES = {  # b, sq, sk, h, hkv, d, causal, window, softcap, block_k
    "mha-37": (2, 37, 37, 2, 2, 16, False, (None, None), 0.0, 16),
    "gqa-causal-sq<sk": (1, 20, 45, 4, 2, 16, True, (None, None), 0.0, 16),
    "gqa-causal-sq>sk-empty-rows": (1, 45, 20, 4, 2, 16, True, (None, None), 0.0, 8),
    "mqa-window-5-3": (2, 50, 50, 4, 1, 32, False, (5, 3), 0.0, 16),
    "window-right-only-softcap": (1, 33, 40, 2, 1, 16, False, (None, 4), 1.5, 16),
    "causal-left-window-softcap": (1, 40, 40, 2, 2, 16, True, (7, None), 1.5, 128),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_rule_equals_jvp_of_the_float32_reference(case):
    b, sq, sk, h, hkv, d, causal, window, softcap, block_k = case
    scale = d ** -0.5
    rule, forward = pure_jax_rule(causal, window, softcap, scale, block_k, h, hkv, d,
                                  return_lse=True)
    primals, tangents = problem(b, sq, sk, h, hkv, d)
    (o, lse), (o_dot, lse_dot) = jax.jit(rule)(primals, tangents)
    (wo, wlse), (wo_dot, wlse_dot) = jax.jvp(forward, primals, tangents)
    close(o, wo)
    close(o_dot, wo_dot)
    close(lse_dot, wlse_dot)
    empty = np.isneginf(np.asarray(wlse))
    assert empty.any() == (causal and sq > sk)   # rows with no key: tangent 0
    assert (np.asarray(o_dot).transpose(0, 2, 1, 3)[empty] == 0).all()


def test_score_term_is_zero_without_score_tangents_and_the_rest_is_p_vdot():
    (q, k, v), (dq, dk, dv) = problem(2, 24, 24, 4, 2, 16)
    rule, forward = pure_jax_rule(True, (None, None), 0.0, 0.25, 16, 4, 2, 16)
    o, lse = forward(q, k, v)
    zero = jnp.zeros_like
    term, c = fj.score_tangent(q, k, v, o, lse, zero(q), zero(k), scale=0.25,
                               mask=fj.dense_mask(24, 24, causal=True), block_k=16)
    assert not np.asarray(term).any() and not np.asarray(c).any()
    _, o_dot = rule((q, k, v), (zero(q), zero(k), dv))
    close(o_dot, forward(q, k, dv)[0])   # P v'


def test_reference_equals_xla_attention():
    (q, k, v), _ = problem(2, 40, 40, 4, 2, 32)
    for causal in (False, True):
        mask = fj.dense_mask(40, 40, causal=causal)
        o, _ = fr.reference_attention(q, k, v, scale=32 ** -0.5, mask=mask)
        close(o, jax.nn.dot_product_attention(q, k, v, is_causal=causal), 1e-5)


def fa4_primals(q, k, v, sink=None, cu_q=None, cu_k=None, used_q=None, used_k=None):
    """flash_attention._differentiable's primal tuple."""
    return (q, k, v, sink, cu_q, cu_k, used_q, used_k, None, None)


def each_example_alone(rule, primals, tangents, rows, keys, masks, scale):
    """The rule's (o, lse) and tangents, each example's rows against the
    reference's jvp on that example alone (q, k, v and the sink)."""
    (o, lse), (o_dot, lse_dot) = jax.jit(rule)(primals, tangents)
    q, k, v, sink = primals[:4]
    for r, kk, mask in zip(rows, keys, masks):
        alone = lambda q, k, v, s: fr.reference_attention(  # noqa: E731
            q, k, v, scale=scale, mask=mask, sink=s)
        args = (q[r], k[kk], v[kk], sink)
        (wo, wlse), (wo_dot, wlse_dot) = jax.jvp(alone, args, tuple(
            t[r] if i == 0 else t[kk] if i < 3 else t for i, t in enumerate(tangents[:4])))
        close(o[r], wo)
        close(o_dot[r], wo_dot)
        lse_rows = (slice(None), r) if lse.ndim == 2 else r
        close(lse[lse_rows], wlse)
        close(lse_dot[lse_rows], wlse_dot)


def forward_of(scale, causal, window=(None, None)):
    """The reference with the rule's default masks, as ``forward(*primals)``."""
    def forward(q, k, v, sink, cu_q, cu_k, used_q, used_k, pages, aux):
        if cu_q is not None:
            mask = fj.varlen_mask(cu_q, cu_k, causal=causal, window_size=window,
                                  seqused_q=used_q, seqused_k=used_k)
        else:
            mask = fj.dense_mask(q.shape[1], k.shape[1], causal=causal, window_size=window,
                                 seqused_q=used_q, seqused_k=used_k)
        return fr.reference_attention(q, k, v, scale=scale, mask=mask, sink=sink)
    return forward


def test_packed_varlen_with_a_sink_equals_each_sequence_alone():
    """Three sequences packed into (T, H, D), ragged lengths, causal with a
    left window per sequence (bottom-right aligned on each), keys past
    seqused_k unused, a learnable sink with its own tangent."""
    lq, lk, used_k = [5, 17, 9], [12, 17, 4], [12, 10, 4]
    h, hkv, d, scale, window = 4, 2, 16, 0.3, (6, None)
    cu_q, cu_k = (jnp.asarray(np.cumsum([0] + n), jnp.int32) for n in (lq, lk))
    q, k, v, dq, dk, dv = normal(3, *[(sum(lq), h, d), (sum(lk), hkv, d), (sum(lk), hkv, d)] * 2)
    sink, dsink = normal(4, (h,), (h,))
    primals = fa4_primals(q, k, v, sink, cu_q, cu_k, None, jnp.asarray(used_k, jnp.int32))
    rule = fj.jvp_rule(Config("float32", d, h // hkv, True), scale, window_size=window,
                       forward=forward_of(scale, True, window), block_k=8, return_lse=True)
    rows = [slice(int(a), int(b)) for a, b in zip(cu_q[:-1], cu_q[1:])]
    keys = [slice(int(a), int(a) + u) for a, u in zip(cu_k[:-1], used_k)]
    masks = [fj.dense_mask(a, b, causal=True, window_size=window) for a, b in zip(lq, used_k)]
    each_example_alone(rule, primals, (dq, dk, dv, dsink), rows, keys, masks, scale)


def test_dense_seqused_with_a_sink_equals_each_example_alone():
    b, sq, sk, h, hkv, d, scale = 3, 24, 30, 4, 1, 16, 0.25
    (q, k, v), (dq, dk, dv) = problem(b, sq, sk, h, hkv, d, seed=6)
    sink, dsink = normal(7, (h,), (h,))
    used_q, used_k = [24, 10, 17], [30, 21, 5]
    primals = fa4_primals(q, k, v, sink, None, None, *(jnp.asarray(u, jnp.int32)
                                                         for u in (used_q, used_k)))
    rule = fj.jvp_rule(Config("float32", d, h // hkv, True), scale,
                       forward=forward_of(scale, True), block_k=16, return_lse=True)
    (o, lse), (o_dot, lse_dot) = jax.jit(rule)(primals, (dq, dk, dv, dsink))
    for i in range(b):
        alone = lambda q, k, v, s: fr.reference_attention(  # noqa: E731
            q, k, v, scale=scale, sink=s,
            mask=fj.dense_mask(used_q[i], used_k[i], causal=True))
        r, kk = slice(0, used_q[i]), slice(0, used_k[i])
        (wo, wlse), (wo_dot, wlse_dot) = jax.jvp(
            alone, (q[i, r], k[i, kk], v[i, kk], sink), (dq[i, r], dk[i, kk], dv[i, kk], dsink))
        close(o_dot[i, r], wo_dot)
        close(lse_dot[i, :, r], wlse_dot)


@pytest.mark.parametrize("layout, option", [
    ("paged", "page_table"), ("q packed", "cu_seqlens_q"), ("k packed", "cu_seqlens_k")])
def test_layouts_xla_does_not_express_raise_naming_the_option(layout, option):
    q, kp = jnp.zeros((2, 8, 2, 16)), jnp.zeros((16, 2, 16))
    cu = jnp.array([0, 8, 16], jnp.int32)
    primals = {"paged": (q, q, q, None, None, None, None, None, jnp.zeros((2, 1), jnp.int32), None),
               "q packed": fa4_primals(kp, q, q, None, cu, None),
               "k packed": fa4_primals(q, kp, kp, None, None, cu)}[layout]
    rule = fj.jvp_rule(Config("float32", 16, 1, False), 0.25, forward=lambda *p: None)
    with pytest.raises(cutecall.DifferentiationError, match=rf"forward mode .* with {option}"):
        rule(primals, primals[:3])


def differentiable_reference(causal, scale, config=None, **jvp_options):
    """The reference as a cutecall.differentiable: defvjp from its own vjp
    (standing in for FA4's backward), defjvp from flash_attention_jvp."""
    h, hkv, d = 4, 2, 16
    _, forward = pure_jax_rule(causal, (None, None), 0.0, scale, 16, h, hkv, d)
    primal = lambda q, k, v: forward(q, k, v)[0]  # noqa: E731
    d_obj = cutecall.differentiable(primal).defvjp(
        lambda q, k, v: (primal(q, k, v), (q, k, v)),
        lambda res, g: jax.vjp(primal, *res)[1](g))
    c = config or Config("float32", d, h // hkv, causal)
    return fj.with_jvp(d_obj, c, scale, forward=forward, block_k=16, **jvp_options), d_obj, primal


def test_wired_rule_serves_jvp_linearize_jacfwd_and_grad_keeps_bwd():
    f, without_jvp, primal = differentiable_reference(True, 0.25)
    primals, tangents = problem(1, 12, 12, 4, 2, 16, seed=5)
    out, out_dot = jax.jit(lambda p, t: jax.jvp(f, p, t))(primals, tangents)
    close(out_dot, jax.jvp(primal, primals, tangents)[1])
    _, lin = jax.linearize(f, *primals)
    close(lin(*tangents), out_dot)
    small = [x[:, :5] for x in primals]
    close(jax.jacfwd(f, argnums=1)(*small), jax.jacfwd(primal, argnums=1)(*small))
    def loss(fn):
        return lambda *p: (fn(*p) ** 2).sum()
    grads = jax.grad(loss(f), argnums=(0, 1, 2))(*primals)
    for g, w in zip(grads, jax.grad(loss(primal), argnums=(0, 1, 2))(*primals)):
        close(g, w)
    with pytest.raises(cutecall.DifferentiationError, match="no forward-mode rule"):
        jax.jvp(without_jvp, primals, tangents)      # the copy left it unchanged


@pytest.mark.parametrize("option", ["score_mod", "mask_mod"])
def test_cute_dsl_mods_raise_in_forward_mode_only(option):
    def mod(*args):  # stands in for a CuTe DSL callable
        return args[0]
    config = Config("float32", 16, 2, False, **{option: mod})
    f, _, _ = differentiable_reference(False, 0.25, config)
    primals, tangents = problem(1, 12, 12, 4, 2, 16)
    with pytest.raises(cutecall.DifferentiationError,
                       match=rf"forward mode .*{option}=.*mod.*jvp_rule\({option[:-4]}=\.\.\.\)"):
        jax.jvp(f, primals, tangents)
    jax.grad(lambda *p: f(*p).sum())(*primals)         # reverse mode unaffected
    equivalent = {"score": fj.identity_score} if option == "score_mod" else \
        {"mask": lambda p: fj.dense_mask(12, 12)}
    f, _, primal = differentiable_reference(False, 0.25, config, **equivalent)
    close(jax.jvp(f, primals, tangents)[1], jax.jvp(primal, primals, tangents)[1])


# -- with FA4's kernels: lowering for cuda --------------------------------

S = jax.ShapeDtypeStruct


def fa4_wired(causal, hkv, h=8, d=64):
    """attention(q, k, v): FA4's backward as its vjp, this rule as its jvp."""
    pytest.importorskip("flash_attn.cute")
    import cutecall.attention as fa
    return lambda q, k, v: fa.attention(q, k, v, causal=causal)


def launches(fn, *args) -> tuple:
    """([(kernel, operands)] one per launch site, lowered text): jax puts each
    kernel call in a private function, called once per launch."""
    text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    owner = {}
    for body in text.split("func.func ")[1:]:
        name, kernel = re.match(r"\w+ @([\w.]+)", body), re.search(r'kernel = "([^"]+)"', body)
        if name and kernel:
            owner[name.group(1)] = kernel.group(1)
    sites = [(owner[f], ops) for f, ops in re.findall(r"call @([\w.]+)\(([^)]*)\)", text)
             if f in owner]
    return sites, text


@pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")
def test_jvp_and_linearize_lower_with_the_forward_kernel_only(compiles):
    f = fa4_wired(causal=True, hkv=2)
    q, kv = S((2, 300, 8, 64), jnp.bfloat16), S((2, 300, 2, 64), jnp.bfloat16)
    sites, text = launches(lambda p, t: jax.jvp(f, p, t), (q, kv, kv), (q, kv, kv))
    assert [k for k, _ in sites] == ["fa4_fwd_bfloat16_d64_g4_causal"] * 3
    operands = [ops for _, ops in sites]
    # the primal, o again in the tangent rule (same operands: one launch
    # after XLA's CSE), and P v' (v's tangent, the last argument)
    assert operands[0] == operands[1] == "%arg0, %arg1, %arg2", operands
    assert operands[2] == "%arg0, %arg1, %arg5", operands
    assert "stablehlo.while" in text       # the score term's scan over key blocks
    assert compiles() == 1                 # v and v' share one compiled kernel
    sites, _ = launches(lambda p, t: jax.linearize(f, *p)[1](*t), (q, kv, kv), (q, kv, kv))
    assert {k for k, _ in sites} == {"fa4_fwd_bfloat16_d64_g4_causal"}, sites
    assert compiles() == 1


@pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")
def test_grad_lowers_through_fa4_backward_with_the_jvp_defined():
    f = fa4_wired(causal=False, hkv=8)
    q = S((2, 256, 8, 64), jnp.bfloat16)
    loss = lambda q, k, v: f(q, k, v).astype(jnp.float32).sum()  # noqa: E731
    sites, text = launches(jax.grad(loss, argnums=(0, 1, 2)), q, q, q)
    names = [k for k, _ in sites]
    assert sum(n.startswith("fa4_bwd_") and "pre" not in n and "post" not in n
               for n in names) == 1, names
    assert any(n.startswith("fa4_bwd_preprocess") for n in names)
    assert "stablehlo.while" not in text   # the jvp's XLA scan is not in grad


def test_the_reference_keeps_its_old_import_path():
    """reference_attention moved to flash_attention_reference; the jvp
    module still exports it (and identity_score), as before the move."""
    assert fj.reference_attention is fr.reference_attention
    assert fj.identity_score is fr.identity_score
    assert {"reference_attention", "identity_score"} <= set(fj.__all__)
