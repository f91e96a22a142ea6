"""The checks the GPU attention-options tests share: outputs, LSE and
the gradients of q, k, v (and the sink) of ``cutecall.attention.attention``
against the float32 reference (``reference.reference``, differentiated with
jax.vjp).

Tolerance ("within bf16 tolerance"): the largest error is at most 2.5% of
the largest reference value (1.5% for fp16), plus a small absolute floor.
"""

import jax
import jax.numpy as jnp
import numpy as np

from cutecall.attention import attention
from cutecall.attention import reference as R

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
