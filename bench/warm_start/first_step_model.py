"""The model of ``first_step.py`` (the 4-GPU first step): one attention
layer (projections to q, k, v with GQA, causal FlashAttention-4 through
``cutecall.attention``), then an MLP on QuACK's GEMMs (``cutecall.quack.mlp``,
tiles pinned as ``bench/scaling/steps.py`` pins them), a squared loss and an
SGD step; its warm-up tasks (module level, so a fork server's workers can
import them); and the CPU stand-ins (``smoke``: a cheap cutecall kernel,
lowered for CUDA; ``plain``: an XLA-only loss, compiled and run on CPU).
"""

from __future__ import annotations

MODEL = dict(batch=16, seqlen=2048, heads=16, heads_kv=4, head_dim=128, embed=2048,
             hidden=5504)
SMOKE = dict(batch=4, seqlen=8, heads=2, heads_kv=2, head_dim=16, embed=32, hidden=64)


# -- the model --------------------------------------------------------------------
def problem(key, m: dict):
    """(w, x, y) at global batch m["batch"]: x (B, S, E), y (B, S, H * D)."""
    import jax
    import jax.numpy as jnp
    from cutecall.attention import training as at
    w, x, _ = at.problem(key, **{k: m[k] for k in ("batch", "seqlen", "heads", "heads_kv",
                                                   "head_dim", "embed")})
    d, h, bf16 = m["heads"] * m["head_dim"], m["hidden"], jnp.bfloat16
    k1, k2, ky = jax.random.split(jax.random.fold_in(key, 1), 3)
    w = dict(w, w1=(jax.random.normal(k1, (h, d)) / d ** 0.5).astype(bf16),
             w2=(jax.random.normal(k2, (d, h)) / h ** 0.5).astype(bf16))
    return w, x, jax.random.normal(ky, x.shape[:2] + (d,)).astype(bf16)


def attend(w, x, d: int):
    from cutecall.attention import attention

    def proj(name):
        return (x @ w[name].astype(x.dtype)).reshape(x.shape[:2] + (-1, d))
    o = attention(proj("q"), proj("k"), proj("v"), causal=True)
    return o.reshape(x.shape[:2] + (-1,))


def feed(w, h):
    from bench.scaling.steps import ACTIVATION, pinned_tiles
    from cutecall.quack import mlp as qm
    return qm.mlp(h, w["w1"], w["w2"], ACTIVATION, tile=pinned_tiles())


def loss(w, x, y, d: int, smoke: bool = False, plain: bool = False):
    import jax.numpy as jnp
    if plain:  # no cutecall kernel: the XLA part of a CPU dry run
        h = (x @ w["q"].astype(x.dtype)).astype(jnp.float32)
        return jnp.mean((jnp.tanh(h) - y.astype(jnp.float32)) ** 2)
    if smoke:  # a cheap cutecall kernel in place of FA4 and QuACK (CPU runs)
        import cutecall
        from cutecall.examples import kernels
        h = (x @ w["q"].astype(x.dtype)).astype(jnp.float32)
        out = cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=lambda a, b: a,
                                    alpha=2.0, relu=True)(h.reshape(-1, h.shape[-1]),
                                                          jnp.zeros(h.shape[-1], jnp.float32))
        return jnp.mean(out)
    out = feed(w, attend(w, x, d))
    return jnp.mean((out.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)


def step(w, x, y, d: int, smoke: bool = False, axis: str | None = None, lr: float = 0.1,
         plain: bool = False):
    """One SGD step (`smoke`: the loss alone, its stand-in kernel has no
    gradient; `plain`: an XLA-only loss, for CPU dry runs)."""
    import jax
    if smoke:
        return loss(w, x, y, d, smoke=True)

    def f(w):
        value = loss(w, x, y, d, plain=plain)
        return jax.lax.pmean(value, axis) if axis else value
    g = jax.grad(f)(w)
    return jax.tree.map(lambda p, g: (p - lr * g).astype(p.dtype), w, g)


# Warm-up tasks (module level, so a fork server's workers can import them):
# the attention and the MLP, forward and gradient, at one process's shapes;
# the whole step last. Kernels two tasks share are compiled once (leases).
def attention_fwd(w, x, y, d):
    return attend(w, x, d)


def attention_grad(w, x, y, d):
    import jax
    return jax.grad(lambda w: attend(w, x, d).astype("float32").sum())(w)


def mlp_fwd(w, x, y, d):
    return feed(w, y)


def mlp_grad(w, x, y, d):
    import jax
    return jax.grad(lambda w: feed(w, y).astype("float32").sum())(w)


def tasks(m: dict, world: int, smoke: bool) -> list:
    import functools
    import jax
    import cutecall
    w, x, y = jax.eval_shape(lambda k: problem(k, dict(m, batch=m["batch"] // world)),
                             jax.random.key(0))
    d = m["head_dim"]
    parts = [] if smoke else [attention_grad, mlp_grad, attention_fwd, mlp_fwd]
    # smoke: step is the loss alone (see step)
    return [cutecall.jax_warmup_task(functools.partial(f, d=d), w, x, y) for f in parts] + \
        [cutecall.jax_warmup_task(functools.partial(step, d=d, smoke=smoke), w, x, y)]
