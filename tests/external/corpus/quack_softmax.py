"""QuACK's softmax forward and backward (``quack.softmax``) as corpus cases:
``Softmax(bf16, N)(mX, mO)`` and ``SoftmaxBackward(bf16, N)(mdY, mY, mdX)``.
The authors' paths are QuACK's torch entry points and its JAX path
(``quack.softmax_jax``, which needs ``jax-tvm-ffi``)."""

from __future__ import annotations

from . import Case
from .quack_common import (JaxRandom, TorchRandom, bf16, cutlass_bf16,
                           jax_kernel, like, mod, name, torch_kernel)


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


BUILDERS = {
    "softmax_fwd": _softmax_fwd,
    "softmax_bwd": _softmax_bwd,
}
