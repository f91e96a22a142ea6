"""A data-parallel training step around FlashAttention-4 in JAX: the model
``tests/attention/test_gpu_flash_attention.py`` checks on 2 GPUs and
``bench/attention/shard_step.py`` times.

The model is one attention layer: projections of x (B, S, E) to q, k and v
(GQA), causal FA4 attention, a squared loss against y (B, S, H, D), and an
SGD update. :func:`sharded_step` splits the batch over a mesh axis with
``jax.shard_map`` and averages the loss over the devices with ``pmean`` (the
gradient is the global batch's); on one device it is :func:`step`. Example::

    import jax
    from cutecall.attention import training as at
    w, x, y = at.problem(jax.random.key(0), batch=4, seqlen=512, heads=8,
                         heads_kv=2, head_dim=64, embed=256)
    w1 = jax.jit(at.step)(w, x, y)                       # one device
    mesh = jax.make_mesh((2,), ("b",))
    w2 = at.sharded_step(mesh)(*at.place(mesh, w, x, y))  # batch over 2 GPUs
"""

from __future__ import annotations

__all__ = ["problem", "loss", "step", "sharded_step", "place", "DATA_PARALLEL_OPTIONS"]

# XLA options :func:`sharded_step` compiles with: one all-reduce per gradient
# tensor (not combined into one at the end of the backward) with the
# latency-hiding scheduler, so each starts while later backward work runs;
# XLA's DotMerger off (it merges the q/k/v projections into one dot on a
# concatenate and slices after: copies that do not shrink with the batch).
# Long-standing DebugOptions fields, accepted by every jaxlib cutecall
# supports. On 4 x H200 (bench/results/scaling.md) they take the 4-GPU step
# from 2783 to 2742 us (run V: 3.53x against 3.52x; 3.83x against 3.68x
# in run N's shorter trials), as they do XLA's cuDNN step (3.56x, 3.45x).
DATA_PARALLEL_OPTIONS = {"xla_gpu_dot_merger_threshold_mb": 0,
                         "xla_gpu_all_reduce_combine_threshold_bytes": 1,
                         "xla_gpu_enable_latency_hiding_scheduler": True}


def problem(key, *, batch: int, seqlen: int, heads: int, heads_kv: int,
            head_dim: int, embed: int):
    """(weights, x, y): weights {"q", "k", "v"} float32 (E, heads * D) and
    (E, heads_kv * D); x (B, S, E) and y (B, S, H, D) bfloat16."""
    import jax
    import jax.numpy as jnp
    kx, kw, ky = jax.random.split(key, 3)
    x = jax.random.normal(kx, (batch, seqlen, embed), jnp.float32).astype(jnp.bfloat16)
    y = jax.random.normal(ky, (batch, seqlen, heads, head_dim),
                          jnp.float32).astype(jnp.bfloat16)
    w = {n: 0.05 * jax.random.normal(k, (embed, m * head_dim), jnp.float32)
         for (n, m), k in zip((("q", heads), ("k", heads_kv), ("v", heads_kv)),
                              jax.random.split(kw, 3))}
    return w, x, y


def loss(w, x, y):
    """Mean squared error of causal attention over the projections of x."""
    import jax.numpy as jnp
    from cutecall.attention import attention
    d = y.shape[-1]

    def proj(name):
        return (x @ w[name].astype(x.dtype)).reshape(x.shape[:2] + (-1, d))
    o = attention(proj("q"), proj("k"), proj("v"), causal=True)
    return jnp.mean((o.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)


def step(w, x, y, average=lambda g: g, lr: float = 0.1):
    """One SGD step; `average` combines the gradients across devices."""
    import jax
    g = average(jax.grad(loss)(w, x, y))
    return jax.tree.map(lambda p, g: p - lr * g, w, g)


def sharded_step(mesh, axis: str = "b", lr: float = 0.1,
                 compiler_options: dict | None = DATA_PARALLEL_OPTIONS):
    """:func:`step` with the batch split over `axis` of `mesh`: jitted,
    weights replicated. The gradient is that of the loss averaged over the
    devices (``pmean``), i.e. the global batch's, as on one device. (A
    ``pmean`` of per-device gradients would not be: under ``shard_map`` JAX
    already sums the gradient of a replicated input over the devices, so
    averaging it afterwards gives N times the step.)

    `compiler_options` go to ``jax.jit``: :data:`DATA_PARALLEL_OPTIONS` by
    default (the gradients' all-reduces overlap the backward); ``None``
    compiles with XLA's defaults."""
    import jax
    from jax.sharding import PartitionSpec as P

    def local(w, x, y):
        g = jax.grad(lambda w: jax.lax.pmean(loss(w, x, y), axis))(w)
        return jax.tree.map(lambda p, g: p - lr * g, w, g)
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P(axis), P(axis)),
                                 out_specs=P()),
                   compiler_options=dict(compiler_options) if compiler_options else None)


def place(mesh, w, x, y, axis: str = "b"):
    """(w, x, y) on `mesh`: w replicated, x and y split along the batch."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    def put(a, spec):
        return jax.device_put(a, NamedSharding(mesh, spec))
    return jax.tree.map(lambda a: put(a, P()), w), put(x, P(axis)), put(y, P(axis))
