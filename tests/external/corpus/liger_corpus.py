"""Liger-Kernel 0.8.5's CuTe DSL ops (``liger_kernel.ops.backends._cutedsl``),
called the way Liger calls them.

Liger's path, from its registered op to the kernel (``jsd.py``,
``swiglu.py``)::

    jsd_loss_and_grad_cutedsl(x, y, labels, beta, ignore_index, n)
      _jsd_loss_and_grad_cutedsl(...)
        compiled = cute.compile(_LigerJSDLossAndGradCuTeDSL(bf16, V, beta),
                                x, y, loss, dx, labels, Float32(0.0), Int64(0),
                                make_fake_stream(use_tvm_ffi_env_stream=True),
                                options="--enable-tvm-ffi")
        compiled(x, y, loss, dx, labels, Float32(1 / n), int(ignore_index))

    _swiglu_cutedsl_forward(a, b, 1.0, 1.0)
      compiled = cute.compile(_LigerSwiGLUCuTeDSLForward(bf16, N), a, b, c,
                              make_fake_stream(...), options="--enable-tvm-ffi")
      compiled(a, b, c)

The case hands Liger's kernel object to cutecall unchanged and calls it
with what Liger passes at launch (no ``output_params`` / ``outputs=``
names: the outputs are found where the kernel writes)::

    call(x, y, labels, Float32(s), -100)             # JAX: (loss, dx)
    kernel(x, y, loss, dx, labels, Float32(s), -100)  # torch: written

JSD puts its outputs *before* an optional input (``labels``); Liger's own
``dx`` is ``x`` itself (in place) -- here a separate tensor, which the
elementwise kernel writes with the same values. The kernel reads
``const_expr(shape[1] % tile == 0)`` at trace time, so it compiles with
the vocabulary size static (as Liger's fake tensors have it; cutecall's
static fallback finds it). ``labels`` is int64 (JAX: ``jax_enable_x64``);
``labels=False`` passes ``None`` there, as Liger does for packed batches.

Shapes: ``"test"`` JSD (1000, 4096) bf16, SwiGLU (1000, 2048) bf16 (an odd
row count); ``"bench"`` JSD (8192, 32000) bf16 (Llama vocabulary), SwiGLU
(16384, 11008) bf16 (Llama-7B's MLP).
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import JaxRandom, TorchRandom, bf16, like, mod

__all__ = ["KERNELS", "SHAPES", "cases", "jsd_case", "swiglu_case"]

KERNELS = ("jsd", "swiglu_fwd")
SHAPES = {
    "test": {"jsd": (1000, 4096), "swiglu_fwd": (1000, 2048)},
    "bench": {"jsd": (8192, 32000), "swiglu_fwd": (16384, 11008)},
}
BETA = 0.5
IGNORE_INDEX = -100
JSD = "liger_kernel.ops.backends._cutedsl.jsd"
SWIGLU = "liger_kernel.ops.backends._cutedsl.swiglu"


def cases(size: str) -> list[Case]:
    """The Liger cases at `size` ("test" or "bench"); JSD without labels
    (no int64 arrays: no ``jax_enable_x64`` needed)."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [jsd_case(*SHAPES[size]["jsd"], labels=False),
            swiglu_case(*SHAPES[size]["swiglu_fwd"])]


@functools.lru_cache(maxsize=None)
def _calls(kind: str, n: int):
    """(JAX call, torch kernel) of Liger's kernel object for vocabulary /
    width `n`: one launch object per object, as Liger caches one compile
    per key. No output names: cutecall finds where the kernel writes."""
    import cutlass

    import cutecall
    import cutecall.torch
    if kind == "jsd":
        obj = mod(JSD)._LigerJSDLossAndGradCuTeDSL(cutlass.BFloat16, n, BETA)

        def out(x, y, labels, scale, ignore_index):
            import jax
            import jax.numpy as jnp
            return jax.ShapeDtypeStruct(x.shape, jnp.float32), like(x)
        return cutecall.cutlass_call(obj, output_shape_dtype=out), \
            cutecall.torch.kernel(obj, outputs=2)
    obj = mod(SWIGLU)._LigerSwiGLUCuTeDSLForward(cutlass.BFloat16, n)
    return cutecall.cutlass_call(obj, output_shape_dtype=lambda a, b: like(a)), \
        cutecall.torch.kernel(obj, outputs=1)


def _jsd_math(x, y, scale, exp, log):
    """Liger's JSD (0 < beta < 1) in float32: (loss, dx)."""
    q, p = exp(x), exp(y)
    m = BETA * p + (1.0 - BETA) * q
    log_m = log(m)
    loss = BETA * p * y + (1.0 - BETA) * q * x - m * log_m
    dx = (1.0 - BETA) * q * (x - log_m)
    return loss * scale, dx * scale


def jsd_case(rows: int, vocab: int, labels: bool = True) -> Case:
    """Liger's JSD loss and gradient on log-probabilities (rows, vocab) bf16;
    `labels`: int64 row labels, every third row ``IGNORE_INDEX``."""
    shape = (rows, vocab)
    scale = 1.0 / rows

    def jax_case(concrete, seed):
        import cutlass
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        # Log-probabilities around -4 (Liger's kernel skips max-subtraction).
        x, y = (r.normal(shape, bf16(), 0.5) for _ in range(2))
        if concrete:
            x, y = x - 4.0, y - 4.0
        lab = None
        if labels:
            lab = r.randint((rows,), jnp.int64, 3)
            if concrete:
                lab = jnp.where(jnp.arange(rows) % 3 == 0, IGNORE_INDEX, lab)
        return _calls("jsd", vocab)[0], (x, y, lab, cutlass.Float32(scale), IGNORE_INDEX)

    def torch_case(device, seed):
        import cutlass
        import torch
        r = TorchRandom(device, seed)
        x, y = (r.normal(shape, torch.bfloat16, 0.5) for _ in range(2))
        if not r.meta:
            x, y = x - 4.0, y - 4.0
        lab = None
        if labels:
            lab = r.randint((rows,), torch.int64, 3)
            if not r.meta:
                lab[::3] = IGNORE_INDEX
        loss = torch.full(shape, float("nan"), dtype=torch.float32, device=r.device)
        dx = torch.full(shape, float("nan"), dtype=torch.bfloat16, device=r.device)
        return _calls("jsd", vocab)[1], (x, y, loss, dx, lab, cutlass.Float32(scale),
                                         IGNORE_INDEX)

    def jax_ref(x, y, lab, s, ignore_index):
        import jax.numpy as jnp
        loss, dx = _jsd_math(x.astype(jnp.float32), y.astype(jnp.float32), scale,
                             jnp.exp, jnp.log)
        if lab is not None:
            keep = (lab != ignore_index)[:, None]
            loss, dx = jnp.where(keep, loss, 0.0), jnp.where(keep, dx, 0.0)
        return loss, dx.astype(x.dtype)

    def torch_ref(x, y, loss, dx, lab, s, ignore_index):
        import torch
        got = _jsd_math(x.float(), y.float(), scale, torch.exp, torch.log)
        if lab is not None:
            keep = (lab != ignore_index)[:, None]
            got = tuple(torch.where(keep, g, 0.0) for g in got)
        return got

    def authors_torch(x, y, loss, dx, lab, s, ignore_index):
        # What _jsd_loss_and_grad_cutedsl compiles and launches (its TVM-FFI
        # build), writing into our loss and dx.
        compiled = mod(JSD)._get_kernel(x.dtype, y.dtype, loss.dtype, dx.dtype, vocab,
                                        float(BETA), has_label=lab is not None)
        compiled(x, y, loss, dx, lab, s, int(ignore_index))

    tag = " labels" if labels else ""
    return Case(f"liger.jsd[bf16 {rows}x{vocab}{tag}]", jax_case, jax_ref, torch_case,
                (2, 3), torch_ref, authors_torch, None, atol=1e-6, rtol=2e-2)


def swiglu_case(rows: int, width: int) -> Case:
    """Liger's SwiGLU forward c = silu(a) * b on (rows, width) bf16."""
    shape = (rows, width)

    def jax_case(concrete, seed):
        r = JaxRandom(concrete, seed)
        return _calls("swiglu", width)[0], (r.normal(shape, bf16()), r.normal(shape, bf16()))

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        a, b = r.normal(shape, torch.bfloat16), r.normal(shape, torch.bfloat16)
        c = torch.full(shape, float("nan"), dtype=torch.bfloat16, device=r.device)
        return _calls("swiglu", width)[1], (a, b, c)

    def jax_ref(a, b):
        import jax
        import jax.numpy as jnp
        af = a.astype(jnp.float32)
        return (jax.nn.silu(af) * b.astype(jnp.float32)).astype(a.dtype)

    def torch_ref(a, b, c):
        import torch
        return (torch.nn.functional.silu(a.float()) * b.float(),)

    def authors_torch(a, b, c):
        mod(SWIGLU)._get_fwd_kernel(a.dtype, b.dtype, c.dtype, width)(a, b, c)

    return Case(f"liger.swiglu_fwd[bf16 {rows}x{width}]", jax_case, jax_ref, torch_case,
                (2,), torch_ref, authors_torch, None, atol=2e-2, rtol=2e-2)


def jax_args_from_torch(args):
    """The JAX call's arguments holding the torch call's input values (the
    outputs left out), to compare both fronts with Liger's path."""
    import jax.numpy as jnp

    def copy(t):
        return None if t is None else jnp.from_dlpack(t.detach().clone().contiguous())
    if len(args) == 3:  # swiglu: (a, b, c)
        return (copy(args[0]), copy(args[1]))
    x, y, _loss, _dx, lab, s, ignore_index = args
    return (copy(x), copy(y), copy(lab), s, ignore_index)
