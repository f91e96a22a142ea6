"""FlashAttention-4's Blackwell (sm100) kernels, built and called the way
FA4's interface (``flash_attn/cute/interface.py``, 4.0.0b36) builds and
calls them on a B200.

The kernel objects are FA4's own: FA4's host functions run on fake torch
tensors (torch's ``FakeTensorMode``, FA4's way of compiling ahead of time)
for arch 100, and every ``cute.compile`` they make is kept
(``authors.compile_calls``) -- the objects and arguments exactly as FA4
builds them, nothing compiled:

=======================  ==================================================
``fwd_causal``           ``_flash_attn_fwd(q, k, v, causal=True)``:
                         ``FlashAttentionForwardSm100``, d128, 1-CTA,
                         q_stage 2, LPT scheduler (not persistent)
``fwd_dense_persistent`` the same, non-causal: 2-CTA MMA and the static
                         persistent scheduler, whose grid is the SM count
                         FA4 reads while tracing
                         (``HardwareInfo().get_device_multiprocessor_count()``)
``bwd_2cta_d128``        ``_flash_attn_bwd(..., causal=True)``, d128:
                         ``FlashAttentionBackwardSm100``, 2-CTA, cluster 2
``bwd_1cta_d64``         the same at d64: 1-CTA
``bwd_postprocess``      the dQ postprocess of ``bwd_2cta_d128``:
                         ``FlashAttentionBackwardPostprocess`` arch 100,
                         the 2-CTA TMEM accumulator order
``fwd_combine``          ``_flash_attn_fwd_combine(..., _arch=100)``:
                         ``FlashAttentionForwardCombine`` (split-KV)
=======================  ==================================================

Each object goes to cutecall unchanged, called with FA4's own argument
list (its ``call_args``: ``Optional`` tensors as None, ``AuxData(None,
None)``, ``softmax_scale`` a float, the forward's ``max_seqlen_q`` an int)::

    call = cutecall.cutlass_call(fwd, output_shape_dtype=(o, lse))
    o, lse = call(q, k, v, scale, None, ..., AuxData(None, None), ..., S)
    cutecall.torch.kernel(fwd, outputs=2)(q, k, v, o, lse, scale, ...)

The backward's dQ accumulator is in/out (the preprocess zeroes it; JAX:
``input_output_aliases={6: 0}``). The postprocess's and the combine's
outputs are followed by Optional tensors, so the torch calls name them.
bf16, (B, S, H) = (1, 512, 2): S > 256 so the dense forward takes FA4's
2-CTA path. Without a GPU FA4 reads its arch from ``_get_device_arch`` (set
to 100 meanwhile) and the SM count from ``FLASH_ATTENTION_NUM_SMS`` (the
target's).
"""

from __future__ import annotations

import contextlib
import functools
import os

from . import authors
from .sm100 import Sm100Case, building, meta, sds, target

BATCH, SEQLEN, HEADS = 1, 512, 2
KERNELS = ("fwd_causal", "fwd_dense_persistent", "bwd_2cta_d128", "bwd_1cta_d64",
           "bwd_postprocess", "fwd_combine")
SPLITS = 3  # the combine's split count


def cases() -> list[Sm100Case]:
    """FA4's sm100 kernels, in ``KERNELS`` order."""
    return [case(k) for k in KERNELS]


# ---------------------------------------------------------------------------
# FA4's host functions on fake tensors, for arch 100

@contextlib.contextmanager
def _fa4_for_sm100(device=None):
    """FA4's host code as on the target: arch 100, its SM count, kernel
    objects built for it, FA4's compile caches set aside (they would keep
    the no-op compiles), torch's fake mode."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from flash_attn.cute import interface
    cached = {name: f for name, f in vars(interface).items() if hasattr(f, "compile_cache")}
    saved = {name: f.compile_cache for name, f in cached.items()}
    arch, sms = interface._get_device_arch, os.environ.get("FLASH_ATTENTION_NUM_SMS")
    os.environ["FLASH_ATTENTION_NUM_SMS"] = str(target(device).device.sm_count)
    interface._get_device_arch = lambda: 100
    for f in cached.values():
        f.compile_cache = {}
    try:
        with building(device), FakeTensorMode():
            yield interface
    finally:
        interface._get_device_arch = arch
        for name, f in cached.items():
            f.compile_cache = saved[name]
        if sms is None:
            os.environ.pop("FLASH_ATTENTION_NUM_SMS", None)
        else:
            os.environ["FLASH_ATTENTION_NUM_SMS"] = sms


def captured(kernel: str, device=None) -> authors.Captured:
    """What FA4's interface hands ``cute.compile`` for `kernel` on the
    target (`device`: a row of ``cutecall.DEVICES``, default the B200): a
    new kernel object each call, as FA4 builds one per compile."""
    import torch
    hdim = 64 if kernel == "bwd_1cta_d64" else 128

    def t(*shape, dtype=torch.bfloat16):
        return torch.empty(shape, dtype=dtype)
    with _fa4_for_sm100(device) as fa4:
        if kernel.startswith("fwd_c") and kernel != "fwd_causal":  # fwd_combine
            f32 = torch.float32
            b, s, h = BATCH, SEQLEN, HEADS
            calls = authors.compile_calls(
                fa4._flash_attn_fwd_combine, t(SPLITS, b, s, h, hdim, dtype=f32),
                t(SPLITS, b, h, s, dtype=f32).transpose(-1, -2), t(b, s, h, hdim),
                t(b, h, s, dtype=f32).transpose(-1, -2), _arch=100)
            return calls[0]
        q = t(BATCH, SEQLEN, HEADS, hdim)
        if kernel.startswith("fwd"):
            calls = authors.compile_calls(fa4._flash_attn_fwd, q, q, q, return_lse=True,
                                          causal=kernel == "fwd_causal", _arch=100)
            return calls[0]
        lse = t(BATCH, HEADS, SEQLEN, dtype=torch.float32)
        calls = authors.compile_calls(fa4._flash_attn_bwd, q, q, q, q, q, lse, causal=True)
        # preprocess, main kernel, dQ postprocess
        return calls[2] if kernel == "bwd_postprocess" else calls[1]


# ---------------------------------------------------------------------------
# The captured arguments as both fronts pass them

def _dtype(x, lib):
    name = x.element_type.__name__
    import jax.numpy as jnp
    import torch
    table = {"BFloat16": (jnp.bfloat16, torch.bfloat16), "Float32": (jnp.float32, torch.float32)}
    return table[name][lib == "torch"]


def _arg(x, lib):
    """A captured argument as `lib` ("jax" or "torch") passes it: a fake
    tensor of known extents as an abstract array or a meta tensor, a DSL
    Float32 as a float; anything else as it is."""
    if hasattr(x, "element_type") and hasattr(x, "shape"):
        shape = tuple(int(n) for n in x.shape)
        return sds(shape, _dtype(x, lib)) if lib == "jax" else meta(shape, _dtype(x, lib))
    if type(x).__name__ == "Float32":
        return float(x)
    return x


def _forward_args(kernel, lib):
    """FA4's forward call (``call_args``) without the stream: (q, k, v, o,
    lse, scale, ...); JAX drops o and lse."""
    cap = captured(kernel)
    args = [_arg(x, lib) for x in cap.args[:-1]]
    return cap.kernel, args if lib == "torch" else args[:3] + args[5:]


def _backward_args(kernel, lib):
    """(q, k, v, do, lse_log2, dpsum, dq_accum, dk, dv, scale, ...); JAX
    drops dk and dv (dq_accum stays: in/out)."""
    cap = captured(kernel)
    args = [_arg(x, lib) for x in cap.args[:-1]]
    return cap.kernel, args if lib == "torch" else args[:7] + args[9:]


@functools.lru_cache(maxsize=None)
def _accum_shape() -> tuple:
    """The dQ accumulator FA4 allocates for ``bwd_2cta_d128``."""
    return tuple(int(n) for n in captured("bwd_2cta_d128").args[6].shape)


def _jax(kernel: str):
    import cutecall
    import jax.numpy as jnp
    bf16, f32 = jnp.bfloat16, jnp.float32
    b, s, h = BATCH, SEQLEN, HEADS
    if kernel.startswith("fwd_") and kernel != "fwd_combine":
        obj, args = _forward_args(kernel, "jax")
        d = args[0].shape[-1]
        return cutecall.cutlass_call(obj, output_shape_dtype=(
            sds((b, s, h, d), bf16), sds((b, h, s), f32))), tuple(args)
    if kernel.startswith("bwd_") and kernel != "bwd_postprocess":
        obj, args = _backward_args(kernel, "jax")
        q, acc = args[0], args[6]
        return cutecall.cutlass_call(obj, output_shape_dtype=(acc, q, q),
                                     input_output_aliases={6: 0}), tuple(args)
    obj = captured(kernel).kernel
    if kernel == "bwd_postprocess":
        return cutecall.cutlass_call(obj, output_shape_dtype=(sds((b, s, h, 128), bf16),)), \
            (sds(_accum_shape(), f32), 128 ** -0.5, None, None, None, None)
    # FA4's combine layouts are transposed views; JAX's row-major arrays
    # reach the kernel through their strides.
    return cutecall.cutlass_call(obj, output_shape_dtype=(
        sds((b, s, h, 128), bf16), sds((b, s, h), f32))), (
        sds((SPLITS, b, s, h, 128), f32), sds((SPLITS, b, s, h), f32))


def _torch(kernel: str):
    import cutecall.torch
    import torch
    f32 = torch.float32
    b, s, h = BATCH, SEQLEN, HEADS
    if kernel.startswith("fwd_") and kernel != "fwd_combine":
        obj, args = _forward_args(kernel, "torch")
        return cutecall.torch.kernel(obj, outputs=2), tuple(args)
    if kernel.startswith("bwd_") and kernel != "bwd_postprocess":
        obj, args = _backward_args(kernel, "torch")
        return cutecall.torch.kernel(obj, outputs=3), tuple(args)
    obj = captured(kernel).kernel
    if kernel == "bwd_postprocess":
        return cutecall.torch.kernel(obj, outputs=("mdQ",)), (
            meta(_accum_shape(), f32), meta((b, s, h, 128)), 128 ** -0.5,
            None, None, None, None)
    return cutecall.torch.kernel(obj, outputs=("mO", "mLSE")), (
        meta((SPLITS, b, s, h, 128), f32),
        meta((SPLITS, b, h, s), f32).transpose(-1, -2), meta((b, s, h, 128)),
        meta((b, h, s), f32).transpose(-1, -2))


_HOW = {
    "fwd_causal": "interface._flash_attn_fwd(q, k, v, causal=True)",
    "fwd_dense_persistent": "interface._flash_attn_fwd(q, k, v)",
    "bwd_2cta_d128": "interface._flash_attn_bwd(q, k, v, o, do, lse, causal=True)",
    "bwd_1cta_d64": "interface._flash_attn_bwd(q, k, v, o, do, lse, causal=True), d64",
    "bwd_postprocess": "interface._bwd_postprocess_convert, from _flash_attn_bwd",
    "fwd_combine": "interface._flash_attn_fwd_combine(o_partial, lse_partial, o, lse)",
}


def case(kernel: str) -> Sm100Case:
    """`kernel` (a ``KERNELS`` entry) through both fronts."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    d = 64 if kernel == "bwd_1cta_d64" else 128
    return Sm100Case(
        name=f"fa4.{kernel}[bf16 B{BATCH} S{SEQLEN} H{HEADS} D{d}]",
        jax=lambda: _jax(kernel), torch=lambda: _torch(kernel),
        mma=kernel not in ("bwd_postprocess", "fwd_combine"), how=_HOW[kernel])
