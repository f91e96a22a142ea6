"""QuACK 0.6.5's Hadamard transform (``quack.transform.hadamard``), called
the way QuACK calls it.

QuACK's path, from its public torch function to the kernel::

    hadamard_transform(x, scale)                  # quack/transform/hadamard.py
      _hadamard_transform_fwd(x_2d, out_2d, scale)   # torch custom op
        HadamardTransform.compile(bf16, N, persistent=False)
          cute.compile(HadamardTransform(bf16, N, persistent=False),
                       x, out, Float32(0.0), 0,      # (batch_sym, N) fakes
                       make_fake_stream(use_tvm_ffi_env_stream=True),
                       options="--enable-tvm-ffi")
        compiled(x, out, scale, 0)                  # num_sms: 0 unless persistent

The case hands QuACK's ``HadamardTransform`` object to cutecall unchanged
and calls it as QuACK launches it, with no output names::

    call(x, scale, 0)                 # JAX: out returned
    kernel(x, out, scale, 0)          # torch: out written

``scale`` is a Python float (the parameter is annotated ``Float32``: a
runtime scalar, so a new scale compiles nothing). The transform is a
Sylvester Hadamard matrix along the last dim, N a power of two.

Shapes: ``"test"`` (1000, 1024) bf16 (an odd row count); ``"bench"``
(16384, 4096) bf16.
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import JaxRandom, TorchRandom, bf16, like, mod

__all__ = ["KERNELS", "SHAPES", "cases", "case", "jax_args_from_torch"]

KERNELS = ("hadamard",)
SHAPES = {"test": {"hadamard": (1000, 1024)}, "bench": {"hadamard": (16384, 4096)}}
HADAMARD = "quack.transform.hadamard"


def cases(size: str) -> list[Case]:
    """The Hadamard case at `size` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["hadamard"])]


@functools.lru_cache(maxsize=None)
def _calls(n: int):
    """(JAX call, torch kernel) of QuACK's ``HadamardTransform(bf16, n)``:
    one launch object per N, as QuACK's ``jit_cache`` keeps one compile."""
    import cutlass

    import cutecall
    import cutecall.torch
    obj = mod(HADAMARD).HadamardTransform(cutlass.BFloat16, n, persistent=False)
    return (cutecall.cutlass_call(obj, output_shape_dtype=lambda x, scale, sms: like(x)),
            cutecall.torch.kernel(obj))


def _sylvester(y, n, stack, reshape):
    """The float32 Sylvester Hadamard transform of y (rows, n) along dim 1."""
    h = 1
    while h < n:
        y = reshape(y, (-1, n // (2 * h), 2, h))
        y = reshape(stack((y[:, :, 0, :] + y[:, :, 1, :], y[:, :, 0, :] - y[:, :, 1, :])), (-1, n))
        h *= 2
    return y


def case(rows: int, n: int, scale: float | None = None) -> Case:
    """QuACK's Hadamard transform of x (rows, n) bf16, times `scale`
    (default 1/sqrt(n), the orthonormal transform)."""
    shape = (rows, n)
    scale = float(n) ** -0.5 if scale is None else scale

    def jax_case(concrete, seed):
        r = JaxRandom(concrete, seed)
        return _calls(n)[0], (r.normal(shape, bf16()), scale, 0)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        out = torch.full(shape, float("nan"), dtype=torch.bfloat16, device=r.device)
        return _calls(n)[1], (r.normal(shape, torch.bfloat16), out, scale, 0)

    def jax_ref(x, s, num_sms):
        import jax.numpy as jnp
        y = _sylvester(x.astype(jnp.float32), n, lambda p: jnp.stack(p, axis=2), jnp.reshape)
        return (y * s).astype(x.dtype)

    def torch_ref(x, out, s, num_sms):
        import torch
        y = _sylvester(x.float(), n, lambda p: torch.stack(p, dim=2), torch.reshape)
        return (y * s,)

    def authors_torch(x, out, s, num_sms):
        # What hadamard_transform(x, s) runs, writing into our `out`.
        mod(HADAMARD)._hadamard_transform_fwd(x, out, float(s))

    return Case(f"quack.hadamard[bf16 {rows}x{n}]", jax_case, jax_ref, torch_case, (1,),
                torch_ref, authors_torch, None, atol=3e-2, rtol=2e-2)


def jax_args_from_torch(args):
    """The JAX call's arguments holding the torch call's input values."""
    import jax.numpy as jnp
    x, _out, s, num_sms = args
    return (jnp.from_dlpack(x.detach().clone().contiguous()), s, num_sms)
