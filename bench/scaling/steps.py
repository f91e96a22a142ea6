"""The training steps the scaling benchmark times: each impl is a loss over
(weights, x, y), an SGD step (under ``shard_map`` on the loss averaged over
the devices with ``pmean``), and a problem of global-batch sizes. Data
parallel: weights replicated, the batch split.

  fa4_cutecall  ``cutecall.attention.training`` (projections to q, k, v with
                GQA, causal FA4 through cutecall, squared loss): the product's
                own step, unchanged
  fa4_cudnn     the same model with ``jax.nn.dot_product_attention(
                implementation="cudnn")`` in place of FA4
  mlp_quack     ``cutecall.quack.mlp`` (QuACK's GEMMs, act(x @ w1.T) @ w2.T),
                squared loss, every GEMM at a pinned tile (no autotuning on a
                fresh machine)
  mlp_xla       the same MLP on XLA's dot (``cutecall.quack.mlp.xla_mlp``)
"""

from __future__ import annotations

import dataclasses
from typing import Callable

IMPLS = ("fa4_cutecall", "fa4_cudnn", "mlp_quack", "mlp_xla")
ATTENTION = dict(batch=16, seqlen=4096, heads=16, heads_kv=4, head_dim=128, embed=2048)
MLP = dict(tokens=32768, d=4096, hidden=11008)  # ~24 ms a step on one H100
ACTIVATION = "gelu_tanh_approx"


@dataclasses.dataclass(frozen=True)
class Case:
    impl: str
    sizes: dict
    problem: Callable        # key -> (w, x, y), global batch
    loss: Callable           # (w, x, y) -> scalar

    def step(self, w, x, y, axis: str | None = None, lr: float = 0.1):
        """One SGD step. Under shard_map (`axis`), the loss is averaged over
        the devices first, so the gradient is the global batch's (JAX sums
        a replicated input's gradient over the devices by itself)."""
        import jax

        def loss(w):
            value = self.loss(w, x, y)
            return jax.lax.pmean(value, axis) if axis else value
        g = jax.grad(loss)(w)
        return jax.tree.map(lambda p, g: (p - lr * g).astype(p.dtype), w, g)


def case(impl: str, sizes: dict | None = None) -> Case:
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    if impl.startswith("fa4"):
        sizes = dict(ATTENTION, **(sizes or {}))
        return Case(impl, sizes, _attention_problem(sizes), _attention_loss(impl))
    sizes = dict(MLP, **(sizes or {}))
    return Case(impl, sizes, _mlp_problem(sizes), mlp_loss(impl))


def _attention_problem(sizes):
    def problem(key):
        from cutecall.attention import training as at
        return at.problem(key, **sizes)
    return problem


def _attention_loss(impl):
    from cutecall.attention import training as at
    if impl == "fa4_cutecall":
        return at.loss

    def loss(w, x, y):
        import jax
        import jax.numpy as jnp
        d = y.shape[-1]

        def proj(name):
            return (x @ w[name].astype(x.dtype)).reshape(x.shape[:2] + (-1, d))
        o = jax.nn.dot_product_attention(proj("q"), proj("k"), proj("v"), is_causal=True,
                                         implementation="cudnn")
        return jnp.mean((o.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)
    return loss


def _mlp_problem(sizes):
    def problem(key):
        import jax
        import jax.numpy as jnp
        t, d, h = sizes["tokens"], sizes["d"], sizes["hidden"]
        kx, k1, k2, ky = jax.random.split(key, 4)
        bf16 = jnp.bfloat16
        w = {"w1": (jax.random.normal(k1, (h, d)) / d ** 0.5).astype(bf16),
             "w2": (jax.random.normal(k2, (d, h)) / h ** 0.5).astype(bf16)}
        return (w, jax.random.normal(kx, (t, d)).astype(bf16),
                jax.random.normal(ky, (t, d)).astype(bf16))
    return problem


def pinned_tiles():
    """A tile per GEMM site, chosen by cutecall's tuner on an H100
    (``bench/quack_mlp``), pinned: no autotuning inside a timed run."""
    from cutecall.quack.gemm import Tile
    pp = dict(pingpong=True)
    return {"fc1": Tile(128, 192, 2, 1, **pp), "fc2": Tile(256, 128, 1, 2),
            "dact": Tile(128, 192, 2, 1, **pp), "dw2": Tile(128, 256, 2, 1),
            "dx": Tile(256, 128, 1, 2), "dw1": Tile(128, 256, 2, 1)}


def mlp_loss(impl):
    """(w, x, y) -> the squared loss of the MLP on `impl`'s GEMMs: QuACK's
    at :func:`pinned_tiles` (``cutecall.quack.mlp.mlp``'s defaults
    otherwise), or XLA's dot (``cutecall.quack.mlp.xla_mlp``)."""
    def loss(w, x, y):
        import jax.numpy as jnp
        from cutecall.quack import mlp as qm
        if impl == "mlp_quack":
            out = qm.mlp(x, w["w1"], w["w2"], ACTIVATION, tile=pinned_tiles())
        else:
            out = qm.xla_mlp(x, w["w1"], w["w2"], ACTIVATION)
        return jnp.mean((out.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)
    return loss


def one_device(c: Case):
    """The step on one device, jitted: (w, x, y) -> w."""
    import jax
    return jax.jit(c.step)


def sharded(c: Case, mesh, axis: str = "b"):
    """The step with the batch split over `axis`, the loss averaged."""
    import jax
    from jax.sharding import PartitionSpec as P
    return jax.jit(jax.shard_map(
        lambda w, x, y: c.step(w, x, y, axis), mesh=mesh,
        in_specs=(P(), P(axis), P(axis)), out_specs=P()))


def place(mesh, w, x, y, axis: str = "b"):
    """(w, x, y) on `mesh`: w replicated, x and y split along the batch."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    def put(a, spec):
        return jax.device_put(a, NamedSharding(mesh, spec))
    return jax.tree.map(lambda a: put(a, P()), w), put(x, P(axis)), put(y, P(axis))


def on_devices(c: Case, devices, key=None):
    """(step, (w, x, y)) for `devices`: jit(step) on one, shard_map on more."""
    import jax
    import numpy as np
    from jax.sharding import Mesh
    w, x, y = c.problem(jax.random.key(0) if key is None else key)
    if len(devices) == 1:
        return one_device(c), jax.device_put((w, x, y), devices[0])
    mesh = Mesh(np.array(devices), ("b",))
    return sharded(c, mesh), place(mesh, w, x, y)
