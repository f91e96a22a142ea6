"""FlashAttention-4's Hopper forward with a ``score_mod`` (flex attention),
called the way FA4 calls it.

The score modification is causal ALiBi with a runtime logit scale, the kind
of callback FA4's users write (FA4's own tests pair an aux tensor with an
aux scalar the same way)::

    score' = score * aux_scalars[0] - slopes[h] * (q_idx - kv_idx)

``score`` is ``softmax_scale * q . k``; ``slopes`` (H,) float32 is the aux
tensor, ``2 ** (-8 (h + 1) / H)``; the logit scale is a ``cutlass.Float32``
aux scalar (FA4's tests pass ``aux_scalars=[cutlass.Int32(...)]``: DSL
values, runtime arguments of the compiled kernel). Both reach the kernel in
FA4's ``AuxData(tensors, scalars)`` NamedTuple, the launcher's
``aux_data`` parameter::

    FlashAttentionForwardSm90(mQ, mK, mV, mO, mLSE, softmax_scale,
        mCuSeqlensQ, mCuSeqlensK, mSeqUsedQ, mSeqUsedK, mPageTable,
        window_size_left, window_size_right, learnable_sink,
        blocksparse_tensors, aux_data, ...)

    call = cutecall.cutlass_call(fa4_flex_corpus.flex_kernel(), output_shape_dtype=...)
    o, lse = call(q, k, v, scale, *[None] * 9,
                  AuxData([slopes], (cutlass.Float32(0.8),)))

The kernel object is the one FA4's ``interface._flash_attn_fwd`` builds
(``causal=True, score_mod=..., aux_tensors=[slopes], aux_scalars=(...)``,
arch 90), captured at its ``cute.compile`` by :func:`fa4_compile_args` --
FA4's host code on fake tensors, nothing compiled -- and handed to cutecall
unchanged. A new logit scale is a new runtime value: it never recompiles.

bf16, head dim 128, MHA, causal. Sizes (B, S, H): "test" (2, 200, 2),
"bench" (2, 4096, 16). The authors' path is ``_flash_attn_fwd(..., out=,
lse=)``: the call FA4's public ``flash_attn_func`` makes, writing the case's
buffers (``flash_attn_func`` allocates its own).
"""

from __future__ import annotations

import contextlib
import functools
import os

from cutecall._driver.dsl import dsl_arch

from . import Case, authors
from . import fa4_kernels
from .fa4_args import JaxArgs, TorchArgs
from .fa4_corpus import Attn

KERNELS = ("fwd_flex_sm90",)
SHAPES = {"test": {"fwd_flex_sm90": (2, 200, 2)},
          "bench": {"fwd_flex_sm90": (2, 4096, 16)}}  # (B, S, H); D = 128
LOGIT_SCALE = 0.8
NONES = (None,) * 9  # mCuSeqlensQ .. blocksparse_tensors
H100_SMS = 132


def cases(size: str) -> list[Case]:
    """The flex case at ``size`` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["fwd_flex_sm90"])]


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's per-head slopes, ``2 ** (-8 (h + 1) / heads)``."""
    return [2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)]


@functools.lru_cache(maxsize=None)
def alibi_score_mod():
    """The ``@cute.jit`` score_mod (one function object: FA4 keys its
    compile cache by the callable's hash, cutecall by its source)."""
    import cutlass
    import cutlass.cute as cute

    @cute.jit
    def alibi_with_logit_scale(score, b_idx, h_idx, q_idx, kv_idx,
                               seqlen_info, aux_tensors, aux_scalars):
        slopes = aux_tensors[0]
        head = cute.make_rmem_tensor(1, cutlass.Int32)
        head.store(h_idx)
        slope = cute.make_rmem_tensor(1, slopes.element_type)
        slope[0] = slopes[head[0]]
        distance = (q_idx - kv_idx).to(cutlass.Float32)
        logit_scale = cute.full_like(score, cutlass.Float32(aux_scalars[0]))
        return score * logit_scale - slope.load().to(cutlass.Float32) * distance

    return alibi_with_logit_scale


def fa4_compile_args(fn, make_args) -> authors.Captured:
    """``authors.compile_args`` for one of FA4's host functions, without a
    GPU: ``make_args() -> (args, kwargs)`` builds its torch tensors inside
    torch's ``FakeTensorMode`` (FA4's own way of compiling ahead of time),
    with the DSL's arch set to sm_90a (FA4's sm90 constructors assert it)
    and, where torch sees no GPU, ``FLASH_ATTENTION_NUM_SMS`` (FA4's
    cross-compile setting; no sm90 kernel setting depends on it) set to the
    H100's 132. ``fn.compile_cache`` is set aside meanwhile, so a kernel FA4
    already compiled in this process is captured too."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with _sm_count(), dsl_arch(fa4_kernels.ARCH), _uncached(fn), FakeTensorMode():
        args, kwargs = make_args()
        return authors.compile_args(fn, *args, **kwargs)


@contextlib.contextmanager
def _sm_count():
    import torch
    unset = "FLASH_ATTENTION_NUM_SMS" not in os.environ
    if unset and not torch.cuda.is_available():
        os.environ["FLASH_ATTENTION_NUM_SMS"] = str(H100_SMS)
    try:
        yield
    finally:
        if unset:
            os.environ.pop("FLASH_ATTENTION_NUM_SMS", None)


@contextlib.contextmanager
def _uncached(fn):
    saved = fn.compile_cache
    fn.compile_cache = {}
    try:
        yield
    finally:
        fn.compile_cache = saved


def capture_forward(batch=1, seqlen=128, heads=2, hdim=fa4_kernels.HDIM,
                    logit_scale=LOGIT_SCALE) -> authors.Captured:
    """What FA4's ``_flash_attn_fwd`` hands to ``cute.compile`` for this
    flex attention (the kernel object does not depend on the shape)."""
    import cutlass

    def make_args():
        import torch
        q = torch.empty(batch, seqlen, heads, hdim, dtype=torch.bfloat16)
        slopes = torch.empty(heads, dtype=torch.float32)
        return (q, q, q), dict(  # FA4's default softmax_scale: hdim ** -0.5
            causal=True, score_mod=alibi_score_mod(),
            aux_tensors=[slopes], aux_scalars=(cutlass.Float32(logit_scale),),
            return_lse=True, _arch=90)

    from flash_attn.cute import interface
    return fa4_compile_args(interface._flash_attn_fwd, make_args)


def flex_kernel(hdim: int = fa4_kernels.HDIM):
    """A new ``FlashAttentionForwardSm90`` as FA4 builds it for this score
    mod (FA4's ``__call__`` stores what it traces on the object: one per
    cutecall wrapper)."""
    return capture_forward(hdim=hdim).kernel


@functools.lru_cache(maxsize=None)
def jax_call(hdim: int = fa4_kernels.HDIM):
    """One ``cutlass_call`` for every shape: ``(q, k, v, scale, *NONES,
    aux) -> (o, lse)``."""
    import jax
    import cutecall

    def outputs(q, *_):
        b, s, h, _d = q.shape
        return (jax.ShapeDtypeStruct(q.shape, q.dtype),
                jax.ShapeDtypeStruct((b, h, s), "float32"))
    return cutecall.cutlass_call(flex_kernel(hdim), output_shape_dtype=outputs)


@functools.lru_cache(maxsize=None)
def torch_kernel(hdim: int = fa4_kernels.HDIM):
    """One launch object (outputs mO, mLSE) for every shape."""
    import cutecall.torch
    return cutecall.torch.kernel(flex_kernel(hdim), outputs=2)


def aux_data(slopes, logit_scale: float = LOGIT_SCALE):
    """FA4's ``AuxData([slopes], (Float32(logit_scale),))``."""
    import cutlass
    from flash_attn.cute.utils import AuxData
    return AuxData([slopes], (cutlass.Float32(logit_scale),))


def case(batch: int, seqlen: int, heads: int) -> Case:
    """The flex forward at (B, S, H), bf16, D = 128."""
    a = Attn(batch, seqlen, heads, causal=True)
    slopes = alibi_slopes(heads)

    def jax(concrete, seed):
        import jax.numpy as jnp
        x = JaxArgs(a, concrete, seed)
        q, k, v, _ = x.qkv_do
        s = jnp.asarray(slopes, jnp.float32) if concrete else \
            x.sds((heads,), jnp.float32)
        return jax_call(), (q, k, v, a.scale, *NONES, aux_data(s))

    def torch(device, seed):
        import torch as th
        x = TorchArgs(a, device, seed)
        q, k, v, _ = x.qkv_do
        s = x.empty((heads,), th.float32) if x.meta else \
            th.tensor(slopes, dtype=th.float32, device=x.device)
        return torch_kernel(), (q, k, v, x.output(a.bshd),
                                x.output(a.bhs, th.float32), a.scale, *NONES,
                                aux_data(s))

    def jax_reference(q, k, v, scale, *rest):
        aux = rest[-1]
        return jax_flex_attention(q, k, v, scale, aux.tensors[0],
                                  aux.scalars[0].value)

    def torch_reference(q, k, v, o, lse, scale, *rest):
        aux = rest[-1]
        return torch_flex_attention(q, k, v, scale, aux.tensors[0],
                                    aux.scalars[0].value)

    return Case(name=a.name("fwd_flex_sm90"), jax=jax,
                jax_reference=jax_reference, torch=torch,
                torch_outputs=(3, 4), torch_reference=torch_reference,
                authors_torch=authors_forward)


def authors_forward(q, k, v, out, lse, softmax_scale, *rest):
    """FA4's ``_flash_attn_fwd`` on the case's tensors, writing out and lse."""
    from flash_attn.cute import interface
    aux = rest[-1]
    interface._flash_attn_fwd(
        q, k, v, softmax_scale=softmax_scale, causal=True,
        score_mod=alibi_score_mod(), out=out, lse=lse,
        aux_tensors=list(aux.tensors), aux_scalars=aux.scalars)


# ---------------------------------------------------------------------------
# References (float32): scores, the score mod, the causal mask, softmax.

def jax_flex_attention(q, k, v, scale, slopes, logit_scale):
    """(O float32 (B, S, H, D), LSE float32 (B, H, S))."""
    import jax
    import jax.numpy as jnp
    hi = jax.lax.Precision.HIGHEST
    f32 = jnp.float32
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(f32), k.astype(f32),
                   precision=hi) * scale
    n = s.shape[-1]
    distance = (jnp.arange(n)[:, None] - jnp.arange(n)[None, :]).astype(f32)
    s = s * logit_scale - slopes.astype(f32)[:, None, None] * distance
    s = jnp.where(distance >= 0, s, -jnp.inf)
    lse = jax.nn.logsumexp(s, axis=-1)
    p = jnp.exp(s - lse[..., None])
    return jnp.einsum("bhqk,bkhd->bqhd", p, v.astype(f32), precision=hi), lse


def torch_flex_attention(q, k, v, scale, slopes, logit_scale):
    import torch
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    n = s.shape[-1]
    i = torch.arange(n, device=s.device)
    distance = (i[:, None] - i[None, :]).float()
    s = s * logit_scale - slopes.float()[:, None, None] * distance
    s = s.masked_fill(distance < 0, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    return torch.einsum("bhqk,bkhd->bqhd", p, v.float()), lse
