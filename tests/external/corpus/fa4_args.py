"""Arguments of the FA4 corpus cases: random Q, K, V, dO; O and LSE from
the reference forward, the statistics from the reference preprocess, so each
kernel sees the inputs FA4's pipeline would hand it (``a``: an
``fa4_corpus.Attn``). ``JaxArgs`` makes JAX arrays (or ShapeDtypeStructs),
``TorchArgs`` CUDA tensors."""

from __future__ import annotations

import functools
import math

from . import fa4_reference as ref


class JaxArgs:
    """ShapeDtypeStructs (``concrete=False``) or device arrays from `seed`."""

    def __init__(self, a, concrete: bool, seed: int):
        self.a, self.concrete, self.seed = a, concrete, seed

    def sds(self, shape, dtype):
        import jax
        return jax.ShapeDtypeStruct(tuple(shape), dtype)

    @functools.cached_property
    def qkv_do(self):
        import jax
        import jax.numpy as jnp
        if not self.concrete:
            return (self.sds(self.a.bshd, jnp.bfloat16),) * 4
        keys = jax.random.split(jax.random.key(self.seed), 4)
        return tuple(jax.random.normal(k, self.a.bshd, jnp.float32)
                     .astype(jnp.bfloat16) for k in keys)

    @functools.cached_property
    def o_lse(self):
        import jax
        import jax.numpy as jnp
        if not self.concrete:
            return (self.sds(self.a.bshd, jnp.bfloat16),
                    self.sds(self.a.bhs, jnp.float32))
        q, k, v, _ = self.qkv_do
        o, lse = jax.jit(ref.jax_attention, static_argnums=(3, 4))(
            q, k, v, self.a.scale, self.a.causal)
        return o.astype(jnp.bfloat16), lse

    @functools.cached_property
    def stats(self):
        """(dPsum, LSE_log2, zeroed dQaccum), as the preprocess leaves them."""
        import jax
        import jax.numpy as jnp
        if not self.concrete:
            stat, acc = self.a.accum
            return (self.sds(stat, jnp.float32),) * 2 + \
                (self.sds(acc, jnp.float32),)
        o, lse = self.o_lse
        return jax.jit(ref.jax_preprocess, static_argnums=3)(
            o, self.qkv_do[3], lse, self.a.tile[0])

    def random_accum(self):
        import jax
        import jax.numpy as jnp
        shape = self.a.accum[1]
        if not self.concrete:
            return self.sds(shape, jnp.float32)
        return jax.random.normal(jax.random.key(self.seed + 1), shape,
                                 jnp.float32)


class TorchArgs:
    """Empty tensors on "meta", else random tensors on `device`."""

    def __init__(self, a, device: str, seed: int):
        import torch
        self.a, self.device = a, torch.device(device)
        self.meta = self.device.type == "meta"
        self.gen = None if self.meta else \
            torch.Generator(device=self.device).manual_seed(seed)

    def empty(self, shape, dtype=None):
        import torch
        return torch.empty(tuple(shape), dtype=dtype or torch.bfloat16,
                           device=self.device)

    def output(self, shape, dtype=None):
        """An output buffer: NaN-filled, so unwritten elements show."""
        t = self.empty(shape, dtype)
        return t if self.meta else t.fill_(math.nan)

    def normal(self, shape, dtype=None):
        import torch
        if self.meta:
            return self.empty(shape, dtype)
        x = torch.randn(tuple(shape), generator=self.gen, device=self.device)
        return x.to(dtype or torch.bfloat16)

    @functools.cached_property
    def qkv_do(self):
        return tuple(self.normal(self.a.bshd) for _ in range(4))

    @functools.cached_property
    def o_lse(self):
        import torch
        if self.meta:
            return (self.empty(self.a.bshd),
                    self.empty(self.a.bhs, torch.float32))
        q, k, v, _ = self.qkv_do
        o, lse = ref.torch_attention(q, k, v, self.a.scale, self.a.causal)
        return o.to(torch.bfloat16), lse

    @functools.cached_property
    def stats(self):
        import torch
        if self.meta:
            stat, acc = self.a.accum
            f32 = torch.float32
            return self.empty(stat, f32), self.empty(stat, f32), \
                self.empty(acc, f32)
        o, lse = self.o_lse
        return ref.torch_preprocess(o, self.qkv_do[3], lse, self.a.tile[0])
