"""QuACK's rotary embedding (``quack.rotary``), called the way QuACK calls it.

QuACK's path, from its public torch function to the kernel::

    apply_rotary(x, cos, sin)                      # quack/rotary.py
      _rotary_fwd_out(x, cos, sin, None, None, out, seqlen, False, False)
        _launch_rotary(...)
          RotaryKernel.compile(bf16, f32, None, None, dim, False, False)
            cute.compile(RotaryKernel(bf16, dim), x, cos, sin, None, None,
                         out, Int32(0), stream)     # (b, s, h, d) symbolic,
                                                    # cos/sin (s_ro, dim // 2)
          compiled(x, cos, sin, None, None, out, max_seqlen)

:func:`captured` runs ``RotaryKernel.compile`` (undecorated: QuACK's
``@jit_cache`` bypassed) up to its ``cute.compile`` and keeps the
``RotaryKernel`` object and the fake arguments; the case hands that object
to cutecall unchanged and calls it with what QuACK passes at launch::

    call(x, cos, sin, None, None, seqlen)            # JAX: out is returned
    kernel(x, cos, sin, None, None, out, seqlen)     # torch: out written

``max_seqlen`` is a Python int, as at QuACK's launch (the parameter is
annotated ``Int32``: a runtime scalar); the stream is cutecall's.

The kernel asserts ``mCos.shape[1] == mSin.shape[1]`` and
``mCos.shape[1] * 2 == self.dim`` at trace time, so it does not compile
with those extents dynamic -- QuACK's own fake cos/sin have ``dim // 2``
static, one kernel per head dim. cutecall's static fallback reads the
failing line and compiles in exactly ``mCos`` dim 1 and ``mSin`` dim 1;
batch, sequence length, heads, head dim and strides stay dynamic (one
compile per divisibility class), and it warns once naming those dims.

Shapes: x is (batch, seqlen, nheads, headdim) bf16, cos/sin (seqlen,
headdim / 2) float32, non-interleaved, full-width rotation (forward,
``conjugate=False``). ``"test"``: (2, 1001, 4, 128) -- an odd sequence
length; ``"bench"``: (4, 4096, 32, 128), a Llama-style attention layer.
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import JaxRandom, TorchRandom, bf16, jax_kernel, like, mod, torch_kernel

__all__ = ["KERNELS", "SHAPES", "cases", "case", "captured", "jax_args_from_torch"]

KERNELS = ("rotary",)

# (batch, seqlen, nheads, headdim)
SHAPES = {
    "test": {"rotary": (2, 1001, 4, 128)},
    "bench": {"rotary": (4, 4096, 32, 128)},
}

ROPE_BASE = 10000.0


def cases(size: str) -> list[Case]:
    """The rotary cases at `size` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["rotary"])]


@functools.lru_cache(maxsize=None)
def captured(headdim: int):
    """QuACK's ``RotaryKernel.compile(bf16, f32, None, None, headdim, False,
    False)`` stopped at its ``cute.compile``: ``(kernel, args, kwargs)``,
    nothing compiled (``authors.compile_args``)."""
    import cutlass
    from .authors import compile_args
    compile_fn = mod("quack.rotary").RotaryKernel.compile.__wrapped__
    return compile_args(compile_fn, cutlass.BFloat16, cutlass.Float32, None, None,
                        headdim, False, False)


@functools.lru_cache(maxsize=None)
def _calls(headdim: int):
    """(JAX call, torch kernel) of one head dim, shared by every case with
    it: one launch object per kernel, as QuACK keeps one per head dim."""
    def build():
        return captured(headdim).kernel
    # cutlass_call's order: the output (mO) follows the last array/None
    # argument (mCuSeqlens); max_seqlen, a runtime scalar, comes after.
    call = jax_kernel(build, lambda x, cos, sin, offsets, cu_seqlens, max_seqlen: like(x))
    return call, torch_kernel(build, outputs=1)


def _angles(seqlen: int, half: int, jax_side: bool):
    """cos, sin of the RoPE angles pos * base^(-i / half), float32."""
    if jax_side:
        import jax.numpy as np
    else:
        import torch as np
    inv_freq = ROPE_BASE ** (-np.arange(half, dtype=np.float32) / half)
    theta = np.arange(seqlen, dtype=np.float32)[:, None] * inv_freq[None, :]
    return np.cos(theta), np.sin(theta)


def _rotate(x, cos, sin, cat):
    """The float32 reference: rotate-half (non-interleaved) RoPE of x
    (b, s, h, d) with cos/sin rows 0..s-1."""
    half = x.shape[-1] // 2
    c, s = cos[: x.shape[1], None, :], sin[: x.shape[1], None, :]
    x0, x1 = x[..., :half], x[..., half:]
    return cat([x0 * c - x1 * s, x0 * s + x1 * c])


def case(batch: int, seqlen: int, nheads: int, headdim: int) -> Case:
    """QuACK's rotary forward on x (batch, seqlen, nheads, headdim) bf16."""
    shape, half = (batch, seqlen, nheads, headdim), headdim // 2

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        x = r.normal(shape, bf16())
        cos, sin = _angles(seqlen, half, True) if concrete else \
            (r.normal((seqlen, half), jnp.float32),) * 2
        return _calls(headdim)[0](), (x, cos, sin, None, None, seqlen)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        x = r.normal(shape, bf16(False))
        if r.meta:
            cos = sin = r.empty((seqlen, half), torch.float32)
        else:
            cos, sin = (t.to(r.device) for t in _angles(seqlen, half, False))
        # On a device, out starts NaN-filled: an element the kernel misses shows.
        out = torch.full(shape, float("nan"), dtype=bf16(False), device=r.device)
        return _calls(headdim)[1](), (x, cos, sin, None, None, out, seqlen)

    def jax_ref(x, cos, sin, offsets, cu_seqlens, max_seqlen):
        import jax.numpy as jnp
        return _rotate(x.astype(jnp.float32), cos, sin,
                       lambda parts: jnp.concatenate(parts, axis=-1))

    def torch_ref(x, cos, sin, offsets, cu_seqlens, out, max_seqlen):
        import torch
        return (_rotate(x.float(), cos, sin, lambda parts: torch.cat(parts, dim=-1)),)

    def authors_torch(x, cos, sin, offsets, cu_seqlens, out, max_seqlen):
        # What apply_rotary(x, cos, sin) runs, writing into our `out`.
        mod("quack.rotary")._rotary_fwd_out(x, cos, sin, offsets, cu_seqlens, out,
                                            max_seqlen, False, False)

    return Case(f"quack.rotary[bf16 {batch}x{seqlen}x{nheads}x{headdim}]", jax_case,
                jax_ref, torch_case, (5,), torch_ref, authors_torch, None,
                atol=2e-2, rtol=2e-2)


def jax_args_from_torch(args):
    """The JAX call's arguments holding the values of the torch call's
    `args` (launcher order, out included): the same inputs, so both fronts
    and QuACK's path can be compared bit for bit."""
    import jax.numpy as jnp
    x, cos, sin, offsets, cu_seqlens, _out, max_seqlen = args

    def copy(t):
        return jnp.from_dlpack(t.detach().clone().contiguous())  # a copy (copy=True: unsupported by the GPU PJRT)
    return (copy(x), copy(cos), copy(sin), offsets, cu_seqlens, max_seqlen)
