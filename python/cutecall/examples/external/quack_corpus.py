"""QuACK (``quack-kernels``) kernels, called the way QuACK calls them.

Each case builds QuACK's own kernel object -- ``Softmax(dtype, N)``,
``RMSNorm(dtype, N, is_layernorm=...)``, ``CrossEntropy(dtype, N)``... --
exactly as QuACK's ``compile`` functions do, and hands it to cutecall with
default specs: ``cutecall.cutlass_call(obj, output_shape_dtype=...)`` for
JAX, ``cutecall.torch.kernel(obj, outputs=...)`` for torch. The arguments
follow the launcher's parameter order (``Optional`` tensors as ``None``,
runtime scalars such as ``eps`` as Python numbers); outputs sit after the
inputs (an output parameter given ``None`` in ``output_shape_dtype``
receives ``None``). The torch calls pass every parameter, outputs
preallocated, in launcher order; ``outputs=`` counts the launcher's last
tensor parameters, or names them where an input follows (cross-entropy). The authors' paths are
QuACK's torch entry points (``quack.softmax._softmax_fwd``,
``quack.rmsnorm._rmsnorm_fwd``, ...) and, for softmax, QuACK's JAX path
(``quack.softmax_jax``, which needs ``jax-tvm-ffi``).

The cases (launcher signature, what the call passes):

=====================  =====================================================
softmax_fwd            ``Softmax(bf16, N)(mX, mO)``: ``call(x)``
softmax_bwd            ``SoftmaxBackward(bf16, N)(mdY, mY, mdX)``: ``call(dy, y)``
rmsnorm_fwd            ``RMSNorm(bf16, N)(mX, mW, mB, mRes, mO, mResO, mRstd,
                       mMean, eps)``: ``call(x, w, None, None, eps)``, outputs
                       ``(out, None, rstd, None)``
layernorm_fwd          ``RMSNorm(bf16, N, is_layernorm=True)``: ``call(x, w, b,
                       None, eps)``, outputs ``(out, None, rstd, mean)``
rmsnorm_bwd            ``RMSNormBackward(bf16, N, ...)(mX, mW, mdO, mdResO,
                       mRstd, mMean, mdX, mdW, mdRes, mdB, sm_count)``:
                       ``call(x, w, dout, None, rstd, None, sm_count)``,
                       outputs ``(dx, dw_partial, None, None)``
cross_entropy_fwd      ``CrossEntropy(bf16, N)(mX, mTarget, mTargetLogit,
                       mLoss, mLSE, mdX, mWeight, ignore_index)``:
                       ``call(x, target, None, ignore_index)``, outputs
                       ``(loss, lse, None, None)`` -- mWeight follows the
                       outputs, so it is bound as a fourth output slot that
                       receives ``None`` (no class weights)
cross_entropy_bwd      ``CrossEntropyBackward(bf16, N)(mX, mTarget, mDLoss,
                       mdX, mLSE, mWeight, ignore_index)``: mdX sits between
                       inputs, so ``call(x, target, dloss, dx, lse, None,
                       ignore_index)`` passes a dx buffer aliased to the
                       output (``input_output_aliases={3: 0}``)
=====================  =====================================================

Sizes: ``"bench"`` is M=16384, N=4096 bf16 for every kernel; ``"test"`` is
N=1024 with M=1000 or 1001 (not multiples of 16).
"""

from __future__ import annotations

import functools
import importlib

from . import Case

KERNELS = ("softmax_fwd", "softmax_bwd", "rmsnorm_fwd", "layernorm_fwd",
           "rmsnorm_bwd", "cross_entropy_fwd", "cross_entropy_bwd")

# (M, N) per kernel and size.
SHAPES = {
    "bench": {k: (16384, 4096) for k in KERNELS},
    "test": {"softmax_fwd": (1000, 1024), "softmax_bwd": (1000, 1024),
             "rmsnorm_fwd": (1001, 1024), "layernorm_fwd": (1000, 1024),
             "rmsnorm_bwd": (1000, 1024), "cross_entropy_fwd": (1001, 1024),
             "cross_entropy_bwd": (1000, 1024)},
}

EPS = 1e-6
IGNORE_INDEX = -100  # QuACK's (and PyTorch's) default


def cases(size: str) -> list[Case]:
    """The QuACK cases at ``size`` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(k, *SHAPES[size][k]) for k in KERNELS]


def case(kernel: str, m: int, n: int) -> Case:
    """One QuACK kernel (a ``KERNELS`` entry) at (M, N), bf16."""
    if kernel in _BUILDERS:
        return _BUILDERS[kernel](m, n)
    from . import quack_corpus_kernels
    return quack_corpus_kernels.build(kernel, m, n)


# ---------------------------------------------------------------------------
# Helpers shared with quack_corpus_kernels (imports happen when called)

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


# ---------------------------------------------------------------------------
# Softmax

def _softmax_fwd(m: int, n: int) -> Case:
    def obj():
        return mod("quack.softmax").Softmax(cutlass_bf16(), n)

    call = jax_kernel(obj, lambda x: like(x))
    kern = torch_kernel(obj, outputs=1)

    def jax_case(concrete, seed):
        r = JaxRandom(concrete, seed)
        return call(), (r.normal((m, n), bf16(), 2.0),)

    def torch_case(device, seed):
        r = TorchRandom(device, seed)
        x = r.normal((m, n), bf16(False), 2.0)
        return kern(), (x, r.empty((m, n), bf16(False)))

    def jax_ref(x):
        import jax
        import jax.numpy as jnp
        return jax.nn.softmax(x.astype(jnp.float32), axis=-1)

    def torch_ref(x, out):
        return (x.float().softmax(dim=-1),)

    def authors_torch(x, out):
        mod("quack.softmax")._softmax_fwd(x, out)

    def authors_jax(x):
        return mod("quack.softmax_jax").softmax(x)  # ImportError without jax_tvm_ffi

    # Probabilities of ~1e-3: bf16 rounding (rtol), not an absolute floor.
    return Case(name("softmax_fwd", m, n), jax_case, jax_ref, torch_case, (1,),
                torch_ref, authors_torch, authors_jax, atol=1e-4, rtol=2e-2)


def _softmax_bwd(m: int, n: int) -> Case:
    def obj():
        return mod("quack.softmax").SoftmaxBackward(cutlass_bf16(), n)

    call = jax_kernel(obj, lambda dy, y: like(dy))
    kern = torch_kernel(obj, outputs=1)

    def jax_case(concrete, seed):
        import jax
        r = JaxRandom(concrete, seed)
        dy, x = r.normal((m, n), bf16()), r.normal((m, n), bf16(), 2.0)
        y = x if not concrete else \
            jax.nn.softmax(x.astype("float32"), axis=-1).astype(bf16())
        return call(), (dy, y)

    def torch_case(device, seed):
        r = TorchRandom(device, seed)
        dy, x = r.normal((m, n), bf16(False)), r.normal((m, n), bf16(False), 2.0)
        y = x if r.meta else x.float().softmax(-1).to(x.dtype)
        return kern(), (dy, y, r.empty((m, n), bf16(False)))

    def jax_ref(dy, y):
        dy, y = dy.astype("float32"), y.astype("float32")
        return y * (dy - (dy * y).sum(axis=-1, keepdims=True))

    def torch_ref(dy, y, dx):
        dy, y = dy.float(), y.float()
        return (y * (dy - (dy * y).sum(dim=-1, keepdim=True)),)

    def authors_torch(dy, y, dx):
        mod("quack.softmax")._softmax_backward(dy, y, dx)

    def authors_jax(dy, y):
        return mod("quack.softmax_jax")._softmax_bwd(dy, y)

    return Case(name("softmax_bwd", m, n), jax_case, jax_ref, torch_case, (2,),
                torch_ref, authors_torch, authors_jax, atol=1e-4, rtol=2e-2)


_BUILDERS = {
    "softmax_fwd": _softmax_fwd,
    "softmax_bwd": _softmax_bwd,
}
