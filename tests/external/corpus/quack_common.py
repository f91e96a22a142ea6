"""Helpers of the QuACK corpus cases: names, argument factories (random
JAX arrays or torch tensors), and the two ways a case builds its call
(``cutecall.cutlass_call`` for JAX, ``cutecall.torch.kernel`` for torch).
JAX, torch and QuACK are imported when called, never at import."""

from __future__ import annotations

import functools
import importlib

EPS = 1e-6
IGNORE_INDEX = -100  # QuACK's (and PyTorch's) default


def name(kernel: str, m: int, n: int) -> str:
    return f"quack.{kernel}[bf16 {m}x{n}]"


def mod(module: str):
    return importlib.import_module(module)


def once(build):
    """``build()`` evaluated on first use and kept: one launch object per
    case, so repeated calls share its specializations."""
    return functools.lru_cache(maxsize=None)(build)


def sds(shape, dtype):
    import jax
    return jax.ShapeDtypeStruct(tuple(shape), dtype)


def like(x):
    return sds(x.shape, x.dtype)


class JaxRandom:
    """Argument factory for ``Case.jax``: ShapeDtypeStructs when not
    concrete, else random device arrays drawn from `seed`."""

    def __init__(self, concrete: bool, seed: int):
        import jax
        self.concrete = concrete
        self.key = jax.random.key(seed)

    def _next(self):
        import jax
        self.key, k = jax.random.split(self.key)
        return k

    def normal(self, shape, dtype, scale=1.0):
        import jax
        import jax.numpy as jnp
        if not self.concrete:
            return sds(shape, dtype)
        x = jax.random.normal(self._next(), tuple(shape), jnp.float32) * scale
        return x.astype(dtype)

    def randint(self, shape, dtype, high):
        import jax
        if not self.concrete:
            return sds(shape, dtype)
        return jax.random.randint(self._next(), tuple(shape), 0, high, dtype)


class TorchRandom:
    """Argument factory for ``Case.torch``: empty tensors on "meta", else
    random tensors on `device` drawn from `seed`."""

    def __init__(self, device: str, seed: int):
        import torch
        self.device = torch.device(device)
        self.meta = self.device.type == "meta"
        self.gen = None if self.meta else \
            torch.Generator(device=self.device).manual_seed(seed)

    def empty(self, shape, dtype):
        import torch
        return torch.empty(tuple(shape), dtype=dtype, device=self.device)

    def normal(self, shape, dtype, scale=1.0):
        import torch
        if self.meta:
            return self.empty(shape, dtype)
        x = torch.randn(tuple(shape), generator=self.gen, device=self.device,
                        dtype=torch.float32) * scale
        return x.to(dtype)

    def randint(self, shape, dtype, high):
        import torch
        if self.meta:
            return self.empty(shape, dtype)
        return torch.randint(0, high, tuple(shape), generator=self.gen,
                             device=self.device, dtype=dtype)


def jax_kernel(build, output_shape_dtype, **kwargs):
    """A cached ``cutlass_call`` of the QuACK kernel object ``build()``,
    default specs."""
    @once
    def get():
        import cutecall
        return cutecall.cutlass_call(build(), output_shape_dtype=output_shape_dtype,
                                     **kwargs)
    return get


def torch_kernel(build, outputs):
    """A cached ``cutecall.torch.kernel`` of ``build()``."""
    @once
    def get():
        import cutecall.torch
        return cutecall.torch.kernel(build(), outputs=outputs)
    return get


def bf16(jax_side: bool = True):
    if jax_side:
        import jax.numpy as jnp
        return jnp.bfloat16
    import torch
    return torch.bfloat16


def cutlass_bf16():
    import cutlass
    return cutlass.BFloat16
