"""FlashAttention-4's split-KV combine kernel, called the way FA4 calls it.

Split-KV attention runs each query over ``num_splits`` slices of the keys,
writing per split a float32 partial output and its log-sum-exp; the combine
kernel merges them (``flash_attn/cute/flash_fwd_combine.py``)::

    lse[b, s, h] = logsumexp_i lse_partial[i, b, s, h]
    out[b, s, h] = sum_i exp(lse_partial[i, b, s, h] - lse[b, s, h])
                         * out_partial[i, b, s, h]

    FlashAttentionForwardCombine(mO_partial, mLSE_partial, mO, mLSE=None,
        cu_seqlens=None, seqused=None, num_splits_dynamic_ptr=None,
        virtual_batch_idx=None, semaphore_to_reset=None, stream=None)

FA4's forward calls it ``combine(out_partial, lse_partial, out, lse)``:
outputs right after the inputs, so cutecall's binding rule places them with
no ``output_params``::

    call = cutecall.cutlass_call(combine_kernel(3, 2),
                                 output_shape_dtype=(o, lse))
    out, lse = call(out_partial, lse_partial)     # mO, mLSE: the outputs

The kernel object is the one FA4's ``interface._flash_attn_fwd_combine``
builds (its ``tile_m``, ``k_block_size`` and ``log_max_splits`` from the
head dim and the split count; the head count is an attribute too), captured
at its ``cute.compile`` on fake tensors by
``fa4_flex_corpus.fa4_compile_args`` and handed to cutecall unchanged.
Split counts up to 32 share one object (``log_max_splits`` 5).

Layouts: the torch calls pass FA4's own -- ``lse_partial`` and ``lse`` are
transposed views of (splits, B, H, S) and (B, H, S) buffers, as
``_flash_attn_fwd`` hands them over (``lse_partial.transpose(-1, -2)``); JAX
arrays are row-major (splits, B, S, H) and (B, S, H), which the kernel
reads through their strides. out_partial float32, out bf16, D = 128. The
last split is empty (LSE ``-inf``) for the first half of the rows, as a
causal split-KV forward leaves it. Sizes (splits, B, S, H): "test" (3, 2,
77, 2), "bench" (16, 16, 8, 32) (decoding with 8 query tokens).

The authors' path is ``_flash_attn_fwd_combine(out_partial, lse_partial,
out, lse)``, the call FA4's forward and its public ``flash_attn_combine``
(which allocates the outputs) make.
"""

from __future__ import annotations

import functools

from . import Case
from . import fa4_kernels

KERNELS = ("fwd_combine",)
SHAPES = {"test": {"fwd_combine": (3, 2, 77, 2)},
          "bench": {"fwd_combine": (16, 16, 8, 32)}}  # (splits, B, S, H)
HDIM = fa4_kernels.HDIM


def cases(size: str) -> list[Case]:
    """The combine case at ``size`` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["fwd_combine"])]


def capture_combine(splits: int, heads: int, batch: int = 1, seqlen: int = 1,
                    hdim: int = HDIM):
    """What FA4's ``_flash_attn_fwd_combine`` hands to ``cute.compile``
    (``authors.Captured``) for these extents, on arch 90."""
    from flash_attn.cute import interface
    from .fa4_flex_corpus import fa4_compile_args

    def make_args():
        import torch
        f32 = torch.float32
        return (torch.empty(splits, batch, seqlen, heads, hdim, dtype=f32),
                torch.empty(splits, batch, heads, seqlen, dtype=f32).transpose(-1, -2),
                torch.empty(batch, seqlen, heads, hdim, dtype=torch.bfloat16),
                torch.empty(batch, heads, seqlen, dtype=f32).transpose(-1, -2)), \
            dict(_arch=90)
    return fa4_compile_args(interface._flash_attn_fwd_combine, make_args)


def combine_kernel(splits: int, heads: int, hdim: int = HDIM):
    """A new ``FlashAttentionForwardCombine`` as FA4 builds it."""
    return capture_combine(splits, heads, hdim=hdim).kernel


@functools.lru_cache(maxsize=None)
def jax_call(splits: int, heads: int, hdim: int = HDIM):
    """``(out_partial, lse_partial) -> (out, lse)`` for every B and S."""
    import jax
    import cutecall

    def outputs(out_partial, lse_partial):
        return (jax.ShapeDtypeStruct(out_partial.shape[1:], "bfloat16"),
                jax.ShapeDtypeStruct(lse_partial.shape[1:], "float32"))
    return cutecall.cutlass_call(combine_kernel(splits, heads, hdim),
                                 output_shape_dtype=outputs)


@functools.lru_cache(maxsize=None)
def torch_kernel(splits: int, heads: int, hdim: int = HDIM):
    """One launch object per config; ``k(out_partial, lse_partial, out,
    lse)``. mLSE has a default (None), so the outputs are named."""
    import cutecall.torch
    return cutecall.torch.kernel(combine_kernel(splits, heads, hdim),
                                 outputs=("mO", "mLSE"))


def case(splits: int, batch: int, seqlen: int, heads: int) -> Case:
    """The combine at (splits, B, S, H), float32 partials, bf16 output."""
    op_shape = (splits, batch, seqlen, heads, HDIM)
    lse_shape = (splits, batch, seqlen, heads)
    empty_rows = seqlen // 2  # rows whose last split holds no keys

    def jax(concrete, seed):
        import jax
        import jax.numpy as jnp
        if not concrete:
            sds = jax.ShapeDtypeStruct
            args = (sds(op_shape, jnp.float32), sds(lse_shape, jnp.float32))
        else:
            ko, kl = jax.random.split(jax.random.key(seed))
            lse = 2.0 * jax.random.normal(kl, lse_shape, jnp.float32)
            lse = lse.at[-1, :, :empty_rows].set(-jnp.inf)
            args = (jax.random.normal(ko, op_shape, jnp.float32), lse)
        return jax_call(splits, heads), args

    def torch(device, seed):
        import torch as th
        dev = th.device(device)
        f32 = th.float32
        # FA4's layouts: LSEs are views of head-major buffers.
        lse_p = th.empty(splits, batch, heads, seqlen, dtype=f32,
                         device=dev).transpose(-1, -2)
        out = th.empty(batch, seqlen, heads, HDIM, dtype=th.bfloat16,
                       device=dev)
        lse = th.empty(batch, heads, seqlen, dtype=f32,
                       device=dev).transpose(-1, -2)
        op = th.empty(op_shape, dtype=f32, device=dev)
        if dev.type != "meta":
            gen = th.Generator(device=dev).manual_seed(seed)
            op.normal_(generator=gen)
            lse_p.normal_(generator=gen).mul_(2.0)
            lse_p[-1, :, :empty_rows] = -float("inf")
            out.fill_(float("nan"))
            lse.fill_(float("nan"))
        return torch_kernel(splits, heads), (op, lse_p, out, lse)

    return Case(
        name=f"fa4.fwd_combine[f32->bf16 splits{splits} B{batch} S{seqlen} "
             f"H{heads} D{HDIM}]",
        jax=jax, jax_reference=jax_combine, torch=torch, torch_outputs=(2, 3),
        torch_reference=lambda op, lp, out, lse: torch_combine(op, lp),
        authors_torch=authors_combine, atol=1e-2, rtol=1e-2)


def authors_combine(out_partial, lse_partial, out, lse):
    """FA4's ``_flash_attn_fwd_combine`` on the case's tensors."""
    from flash_attn.cute import interface
    interface._flash_attn_fwd_combine(out_partial, lse_partial, out, lse)


# ---------------------------------------------------------------------------
# References (float32). A split whose LSE is -inf weighs nothing.

def jax_combine(out_partial, lse_partial):
    """(out (B, S, H, D), lse (B, S, H)), float32."""
    import jax
    import jax.numpy as jnp
    lse = jax.nn.logsumexp(lse_partial, axis=0)
    weight = jnp.where(jnp.isneginf(lse_partial), 0.0,
                       jnp.exp(lse_partial - lse))
    return jnp.sum(weight[..., None] * out_partial, axis=0), lse


def torch_combine(out_partial, lse_partial):
    import torch
    lse = torch.logsumexp(lse_partial.float(), dim=0)
    weight = torch.exp(lse_partial - lse)
    weight = weight.masked_fill(torch.isneginf(lse_partial), 0.0)
    return (weight[..., None] * out_partial).sum(0), lse
