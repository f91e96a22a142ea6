"""FlashAttention-4 (``flash-attn-4``, ``flash_attn.cute``) on Hopper,
called the way FA4 calls its kernels.

Every case builds FA4's own kernel object with the constructor arguments
``flash_attn/cute/interface.py`` (4.0.0b36) uses on sm90 -- the tile config
from FA4's own ``_tile_size_fwd_sm90`` / ``_tile_size_bwd_sm90`` -- and hands
it to cutecall with default specs: ``cutecall.cutlass_call(obj,
output_shape_dtype=...)`` for JAX, ``cutecall.torch.kernel(obj,
outputs=...)`` for torch. Arguments follow the launcher's parameter order
(``Optional`` tensors as ``None``, ``softmax_scale`` a Python float,
trailing defaulted parameters omitted). bf16, head dim 128, one KV head per
Q head (MHA), no varlen/paged/sparse/softcap. Sizes (B, S, H): "test"
(1, 256, 2), "bench" (2, 4096, 16); D = 128.

The cases (launcher; what a JAX call passes; outputs):

fwd_sm90
    ``FlashAttentionForwardSm90(mQ, mK, mV, mO, mLSE, softmax_scale, ...)``;
    ``call(q, k, v, scale)``; O (B, S, H, D) bf16, LSE (B, H, S) f32.
bwd_preprocess
    ``FlashAttentionBackwardPreprocess(mO, mdO, mPdPsum, mLSE, mLSElog2,
    mdQaccum, mCuSeqlensQ, mSeqUsedQ, mdLSE, mRowMax, mScaleP,
    softmax_scale, ...)``; its outputs sit between inputs, so the call
    names them (``output_params=("mPdPsum", "mLSElog2", "mdQaccum")``):
    ``call(o, do, lse, None x5, 1.0)``; dPsum and LSE_log2 (B, H, Sr) f32,
    dQaccum (B, H, Sr * D) f32 (Sr: S rounded up to the backward's tile_m).
bwd_sm90
    ``FlashAttentionBackwardSm90(mQ, mK, mV, mdO, mLSE, mdPsum, mdQaccum,
    mdK, mdV, softmax_scale, ...)``; ``call(q, k, v, do, lse_log2, dpsum,
    dq_accum, scale)`` (FA4 passes LSE_log2 as ``mLSE``); dQaccum (in/out,
    aliased: the kernel adds into it), dK, dV (B, S, H, D) bf16.
bwd_postprocess
    ``FlashAttentionBackwardPostprocess(mdQaccum, mdQ, scale, mCuSeqlensQ,
    mSeqUsedQ, sink_tensors, ...)``; ``call(dq_accum, scale, None, None,
    None)``; dQ (B, S, H, D) bf16.

The torch calls pass every parameter up to the last one given, outputs
preallocated in their places (``Case.torch_outputs``): e.g. ``k(q, k, v, o,
lse, scale)``, ``k(dq_accum, dq, scale, None, None, None)``.

Each kernel comes non-causal and causal (``*_causal``): the backward's tile
(tile_m 80 with dQ_swapAB, or 64) changes with causality, and so does the
dQ accumulator's order (``fa4_reference.dq_accum_order``). With MHA FA4 runs
no dK/dV postprocess (that is GQA only).

``jax_flash_attention(causal)`` composes the four calls into a
differentiable JAX attention (``jax.custom_vjp``), as FA4's ``FlashAttnFunc``
composes its kernels for torch.

The authors' paths (``authors_torch``): ``interface._flash_attn_fwd`` (out=,
lse=), ``interface._bwd_preprocess`` and ``interface._bwd_postprocess_convert``
-- FA4's own compile-and-launch functions for those kernels -- and, for the
main backward kernel, which FA4 launches only inside ``_flash_attn_bwd``,
the kernel object compiled exactly as ``_flash_attn_bwd`` compiles it
(``to_cute_tensor`` + ``cute.compile(..., options="--enable-tvm-ffi")``) and
called with the case's tensors.

Each cutecall wrapper (one ``cutlass_call`` per kernel and shape, one
``cutecall.torch.kernel`` per kernel config) gets its own kernel object, as
FA4 builds one per compile: FA4's ``__call__`` leaves what it traced on the
object.

FA4's constructors read the target arch from the CuTe DSL
(``BaseDSL._get_dsl().get_arch_enum()``: ``$CUTE_DSL_ARCH``, else the
detected GPU, else sm_100a) and the sm90 classes assert an sm_90a-family
arch; the builders here set the DSL's arch to sm_90a while constructing
(restored after), so cases build on a machine without a GPU.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from . import Case
from . import fa4_kernels as fa4
from .fa4_args import JaxArgs, TorchArgs
from . import fa4_reference as ref

SIZES = {"test": (1, 256, 2), "bench": (2, 4096, 16)}  # (B, S, H); D = 128


@dataclasses.dataclass(frozen=True)
class Attn:
    """One attention problem: (B, S, H, D) bf16, MHA, seqlen_q == seqlen_k,
    softmax_scale = D ** -0.5."""

    batch: int
    seqlen: int
    heads: int
    hdim: int = fa4.HDIM
    causal: bool = False

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.hdim)

    @property
    def bshd(self) -> tuple:
        return (self.batch, self.seqlen, self.heads, self.hdim)

    @property
    def bhs(self) -> tuple:
        return (self.batch, self.heads, self.seqlen)

    @property
    def accum(self) -> tuple:
        """((B, H, Sr), (B, H, Sr * D)): backward statistics, dQaccum."""
        return fa4.accum_shapes(self.batch, self.seqlen, self.heads,
                                self.causal, self.hdim)

    @property
    def tile(self) -> tuple:
        """(tile_m, dQ_swapAB) of the backward: the dQaccum order."""
        cfg = fa4.bwd_config(self.causal, self.hdim)
        return cfg.m_block_size, cfg.dQ_swapAB

    def name(self, kernel: str) -> str:
        causal = "_causal" if self.causal else ""
        return (f"fa4.{kernel}{causal}[bf16 B{self.batch} S{self.seqlen} "
                f"H{self.heads} D{self.hdim}]")


def cases(size: str) -> list[Case]:
    """The FA4 cases at ``size`` ("test" or "bench")."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    return build(*SIZES[size])


def build(batch: int, seqlen: int, heads: int) -> list[Case]:
    """Every FA4 case at one shape, non-causal then causal."""
    out = []
    for causal in (False, True):
        a = Attn(batch, seqlen, heads, causal=causal)
        out += [_forward(a), _preprocess(a), _backward(a), _postprocess(a)]
    return out


def jax_flash_attention(causal: bool = False):
    """FA4's Hopper attention as a differentiable JAX function, composed from
    the cases' calls the way FA4's ``FlashAttnFunc`` composes its kernels:
    ``f(q, k, v) -> o`` for (B, S, H, 128) bf16, whose VJP runs the
    preprocess, the backward and the dQ postprocess. Example::

        f = fa4_corpus.jax_flash_attention(causal=True)
        o = f(q, k, v)
        dq, dk, dv = jax.grad(lambda q, k, v: f(q, k, v).sum(),
                              argnums=(0, 1, 2))(q, k, v)
    """
    import jax

    def problem(q) -> Attn:
        return Attn(*q.shape, causal=causal)

    def forward(q, k, v):
        a = problem(q)
        o, lse = _jax_call("fwd", a)(q, k, v, a.scale)
        return o, (q, k, v, o, lse)

    def backward(res, do):
        q, k, v, o, lse = res
        a = problem(q)
        dpsum, lse_log2, dq_accum = _jax_call("bwd_preprocess", a)(
            o, do, lse, None, None, None, None, None, 1.0)
        dq_accum, dk, dv = _jax_call("bwd", a)(
            q, k, v, do, lse_log2, dpsum, dq_accum, a.scale)
        (dq,) = _jax_call("bwd_postprocess", a)(
            dq_accum, a.scale, None, None, None)
        return dq, dk, dv

    @jax.custom_vjp
    def attention(q, k, v):
        return forward(q, k, v)[0]

    attention.defvjp(forward, backward)
    return attention


@functools.lru_cache(maxsize=None)
def _jax_call(kernel: str, a: Attn):
    """One ``cutlass_call`` per kernel and shape (its call site is reused)."""
    import jax
    import jax.numpy as jnp
    import cutecall
    sds = jax.ShapeDtypeStruct
    stat, acc = a.accum
    bf16, f32 = jnp.bfloat16, jnp.float32
    if kernel == "fwd":
        return cutecall.cutlass_call(
            fa4.fwd_kernel(a.causal, a.hdim),
            output_shape_dtype=(sds(a.bshd, bf16), sds(a.bhs, f32)))
    if kernel == "bwd_preprocess":
        # The outputs sit between inputs (mLSE comes after mPdPsum): named.
        return cutecall.cutlass_call(
            fa4.preprocess_kernel(a.causal, a.hdim),
            output_shape_dtype=(sds(stat, f32), sds(stat, f32), sds(acc, f32)),
            output_params=_PREPROCESS_OUTPUTS)
    if kernel == "bwd":
        # dQaccum is accumulated into (atomics): in/out, zeroed by the
        # preprocess; dK and dV are plain outputs after it.
        return cutecall.cutlass_call(
            fa4.backward_kernel(a.causal, a.hdim),
            output_shape_dtype=(sds(acc, f32), sds(a.bshd, bf16),
                                sds(a.bshd, bf16)),
            input_output_aliases={6: 0})
    return cutecall.cutlass_call(
        fa4.postprocess_kernel(a.causal, a.hdim),
        output_shape_dtype=(sds(a.bshd, bf16),))


_PREPROCESS_OUTPUTS = ("mPdPsum", "mLSElog2", "mdQaccum")

# outputs=n takes the n tensor parameters the binding rule places after the
# inputs: right for fwd (mO, mLSE) and bwd (mdQaccum, mdK, mdV). The
# preprocess's outputs sit between inputs, and the postprocess's mdQ is
# followed by Optional tensors without defaults (n=1 would pick
# sink_tensors): those name their outputs.
_TORCH_OUTPUTS = {"fwd": 2, "bwd": 3,
                  "bwd_preprocess": _PREPROCESS_OUTPUTS,
                  "bwd_postprocess": ("mdQ",)}
_BUILDERS = {"fwd": fa4.fwd_kernel, "bwd_preprocess": fa4.preprocess_kernel,
             "bwd": fa4.backward_kernel,
             "bwd_postprocess": fa4.postprocess_kernel}


@functools.lru_cache(maxsize=None)
def _torch_kernel(kernel: str, causal: bool, hdim: int):
    """One launch object per kernel config; it serves every shape."""
    import cutecall.torch
    return cutecall.torch.kernel(_BUILDERS[kernel](causal, hdim),
                                 outputs=_TORCH_OUTPUTS[kernel])


# ---------------------------------------------------------------------------
# The cases

def _forward(a: Attn) -> Case:
    def jax(concrete, seed):
        x = JaxArgs(a, concrete, seed)
        q, k, v, _ = x.qkv_do
        return _jax_call("fwd", a), (q, k, v, a.scale)

    def torch(device, seed):
        import torch as th
        x = TorchArgs(a, device, seed)
        q, k, v, _ = x.qkv_do
        out, lse = x.output(a.bshd), x.output(a.bhs, th.float32)
        return _torch_kernel("fwd", a.causal, a.hdim), (
            q, k, v, out, lse, a.scale)

    return Case(
        name=a.name("fwd_sm90"), jax=jax,
        jax_reference=lambda q, k, v, scale: ref.jax_attention(
            q, k, v, scale, a.causal),
        torch=torch, torch_outputs=(3, 4),
        torch_reference=lambda q, k, v, o, lse, scale: ref.torch_attention(
            q, k, v, scale, a.causal),
        authors_torch=fa4.authors_forward(a.causal))


def _preprocess(a: Attn) -> Case:
    nones = (None,) * 5  # mCuSeqlensQ, mSeqUsedQ, mdLSE, mRowMax, mScaleP

    def jax(concrete, seed):
        x = JaxArgs(a, concrete, seed)
        o, lse = x.o_lse
        # softmax_scale is read only with mScaleP; FA4 passes its default 1.0.
        return _jax_call("bwd_preprocess", a), (
            o, x.qkv_do[3], lse, *nones, 1.0)

    def torch(device, seed):
        import torch as th
        x = TorchArgs(a, device, seed)
        o, lse = x.o_lse
        stat, acc = a.accum
        outs = [x.output(s, th.float32) for s in (stat, stat, acc)]
        return _torch_kernel("bwd_preprocess", a.causal, a.hdim), (
            o, x.qkv_do[3], outs[0], lse, outs[1], outs[2], *nones, 1.0)

    return Case(
        name=a.name("bwd_preprocess"), jax=jax,
        jax_reference=lambda o, do, lse, *rest: ref.jax_preprocess(
            o, do, lse, a.tile[0]),
        torch=torch, torch_outputs=(2, 4, 5),
        torch_reference=lambda o, do, _dpsum, lse, *rest: ref.torch_preprocess(
            o, do, lse, a.tile[0]),
        authors_torch=fa4.authors_preprocess(a.causal, a.hdim),
        atol=1e-3, rtol=1e-3)


def _backward(a: Attn) -> Case:
    def jax(concrete, seed):
        x = JaxArgs(a, concrete, seed)
        q, k, v, do = x.qkv_do
        dpsum, lse_log2, dq_accum = x.stats
        return _jax_call("bwd", a), (q, k, v, do, lse_log2, dpsum, dq_accum,
                                     a.scale)

    def torch(device, seed):
        x = TorchArgs(a, device, seed)
        q, k, v, do = x.qkv_do
        dpsum, lse_log2, dq_accum = x.stats
        return _torch_kernel("bwd", a.causal, a.hdim), (
            q, k, v, do, lse_log2, dpsum, dq_accum, x.output(a.bshd),
            x.output(a.bshd), a.scale)

    def jax_reference(q, k, v, do, lse_log2, dpsum, dq_accum, scale):
        return ref.jax_backward(q, k, v, do, lse_log2, dpsum, dq_accum, scale,
                                a.causal, *a.tile)

    def torch_reference(q, k, v, do, lse_log2, dpsum, dq_accum, dk, dv, scale):
        # dq_accum is in/out: expected values are for the zeroed accumulator
        # FA4 hands the kernel, whether or not the launch already ran.
        return ref.torch_backward(q, k, v, do, lse_log2, dpsum,
                                  dq_accum.new_zeros(dq_accum.shape), scale,
                                  a.causal, *a.tile)

    return Case(
        name=a.name("bwd_sm90"), jax=jax, jax_reference=jax_reference,
        torch=torch, torch_outputs=(6, 7, 8), torch_reference=torch_reference,
        authors_torch=fa4.authors_backward(a.causal, a.hdim),
        atol=5e-2, rtol=5e-2)


def _postprocess(a: Attn) -> Case:
    def jax(concrete, seed):
        x = JaxArgs(a, concrete, seed)
        return _jax_call("bwd_postprocess", a), (
            x.random_accum(), a.scale, None, None, None)

    def torch(device, seed):
        import torch as th
        x = TorchArgs(a, device, seed)
        return _torch_kernel("bwd_postprocess", a.causal, a.hdim), (
            x.normal(a.accum[1], th.float32), x.output(a.bshd), a.scale,
            None, None, None)

    return Case(
        name=a.name("bwd_postprocess"), jax=jax,
        jax_reference=lambda acc, scale, *rest: (ref.jax_postprocess(
            acc, scale, a.seqlen, *a.tile),),
        torch=torch, torch_outputs=(1,),
        torch_reference=lambda acc, dq, scale, *rest: (ref.torch_postprocess(
            acc, scale, a.seqlen, *a.tile),),
        authors_torch=fa4.authors_postprocess(a.causal, a.hdim))
