"""Kernels issue 37 times that the corpus does not hold: QuACK's top-k
forward (its ``TopK`` object, as ``TopK.compile`` builds it) and two FA4
forward variants, a local (sliding) window and varlen with grouped-query
heads (the kernel objects FA4's ``_flash_attn_fwd`` builds for those calls,
captured without a GPU, ``fa4_flex_corpus.fa4_compile_args``). Each is
called through cutecall's fronts and through its authors' entry point, as a
``corpus.Case`` for ``jax_profile.py`` (timing only: the references are the
authors' paths).

Arguments after the outputs follow FA4's ``FlashAttentionForwardSm90``
call: softmax scale, cu_seqlens q/k, seqused q/k, page table, window left /
right, learnable sink, block sparsity, aux data.
"""

from __future__ import annotations

import functools

HDIM = 128
LOCAL = {"bench": (2, 4096, 16, 1024, 0), "test": (1, 256, 2, 64, 0)}  # B, S, H, left, right
VARLEN = {"bench": (8, 1024, 32, 8), "test": (2, 128, 4, 2)}  # seqs, seqlen, H, Hkv
TOPK = {"bench": (16384, 4096, 32), "test": (64, 1024, 8)}  # M, N, k


@functools.lru_cache(maxsize=None)
def _kernel(variant: str):
    """FA4's kernel object for `variant` (its shape-independent config)."""
    from corpus.fa4_flex_corpus import fa4_compile_args
    from flash_attn.cute import interface

    def make_args():
        import torch
        if variant == "local":
            q = torch.empty(1, 256, 2, HDIM, dtype=torch.bfloat16)
            return (q, q, q), dict(window_size_left=64, window_size_right=0,
                                   return_lse=True, _arch=90)
        q = torch.empty(256, 8, HDIM, dtype=torch.bfloat16)
        k = torch.empty(256, 2, HDIM, dtype=torch.bfloat16)
        cu = torch.zeros(3, dtype=torch.int32)
        return (q, k, k), dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=128,
                               max_seqlen_k=128, return_lse=True, _arch=90)
    return fa4_compile_args(interface._flash_attn_fwd, make_args).kernel


def _lse_shape(q_shape) -> tuple:
    """FA4's LSE: (B, H, S), or (H, total) for varlen."""
    if len(q_shape) == 4:
        return (q_shape[0], q_shape[2], q_shape[1])
    return (q_shape[1], q_shape[0])


def _outputs(q, *_):
    import jax
    return (jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct(_lse_shape(q.shape), "float32"))


@functools.lru_cache(maxsize=None)
def _calls(variant: str):
    import cutecall
    import cutecall.torch
    kernel = _kernel(variant)
    return (cutecall.cutlass_call(kernel, output_shape_dtype=_outputs),
            cutecall.torch.kernel(kernel, outputs=2))


def _tail(variant, cu, left, right):
    """The kernel's arguments after the scale: (cu_q, cu_k, used_q, used_k,
    page table, left, right, sink, block sparsity, aux data)."""
    from flash_attn.cute.utils import AuxData
    window = (left, right) if variant == "local" else (None, None)
    return (cu, cu, None, None, None, *window, None, None, AuxData(None, None))


def _case(variant: str, q_shape, kv_shape, cu_values, window, name: str):
    from corpus import Case
    scale = HDIM ** -0.5

    def jax_case(concrete, seed):
        import jax
        import jax.numpy as jnp
        if concrete:
            keys = jax.random.split(jax.random.key(seed), 3)
            q, k, v = (jax.random.normal(kk, s, jnp.float32).astype(jnp.bfloat16)
                       for kk, s in zip(keys, (q_shape, kv_shape, kv_shape)))
            cu = None if cu_values is None else jnp.asarray(cu_values, jnp.int32)
        else:
            sds = jax.ShapeDtypeStruct
            q, k, v = sds(q_shape, jnp.bfloat16), sds(kv_shape, jnp.bfloat16), \
                sds(kv_shape, jnp.bfloat16)
            cu = None if cu_values is None else sds((len(cu_values),), jnp.int32)
        return _calls(variant)[0], (q, k, v, scale, *_tail(variant, cu, *window))

    def torch_case(device, seed):
        import torch
        gen = torch.Generator(device="cpu").manual_seed(seed)
        q, k, v = (torch.randn(s, generator=gen).to(device, torch.bfloat16)
                   for s in (q_shape, kv_shape, kv_shape))
        cu = None if cu_values is None else torch.tensor(cu_values, dtype=torch.int32,
                                                          device=device)
        out = torch.empty_like(q)
        lse_t = torch.empty(_lse_shape(tuple(q.shape)), dtype=torch.float32, device=device)
        return _calls(variant)[1], (q, k, v, out, lse_t, scale, *_tail(variant, cu, *window))

    def authors(q, k, v, out, lse, softmax_scale, cu, *rest):
        from flash_attn.cute import interface
        kw = dict(window_size_left=window[0], window_size_right=window[1]) \
            if variant == "local" else dict(
                cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=window[0],
                max_seqlen_k=window[0])
        interface._flash_attn_fwd(q, k, v, softmax_scale=softmax_scale, out=out, lse=lse,
                                  return_lse=True, **kw)

    def no_reference(*_):
        raise NotImplementedError("timing only: compare with the authors' path")
    return Case(name, jax_case, no_reference, torch_case, (3, 4), no_reference,
                authors_torch=authors)


def topk_case(m: int, n: int, k: int):
    """QuACK's top-k forward of bf16 (M, N) rows: values (M, k), int32
    indices (M, k); the authors' path is ``quack.topk._topk_fwd``."""
    import functools as ft

    from corpus import Case

    @ft.lru_cache(maxsize=None)
    def calls():
        import cutlass
        import jax
        from quack.topk import TopK

        import cutecall
        import cutecall.torch
        obj = TopK(cutlass.BFloat16, n, k)
        out = lambda x: (jax.ShapeDtypeStruct((x.shape[0], k), x.dtype),  # noqa: E731
                         jax.ShapeDtypeStruct((x.shape[0], k), "int32"))
        return cutecall.cutlass_call(obj, output_shape_dtype=out), \
            cutecall.torch.kernel(obj, outputs=2)

    def jax_case(concrete, seed):
        import jax
        import jax.numpy as jnp
        x = jax.random.normal(jax.random.key(seed), (m, n), jnp.float32).astype(
            jnp.bfloat16) if concrete else jax.ShapeDtypeStruct((m, n), jnp.bfloat16)
        return calls()[0], (x,)

    def torch_case(device, seed):
        import torch
        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn((m, n), generator=gen).to(device, torch.bfloat16)
        return calls()[1], (x, torch.empty((m, k), dtype=x.dtype, device=device),
                            torch.empty((m, k), dtype=torch.int32, device=device))

    def authors(x, values, indices):
        from quack.topk import _topk_fwd
        _topk_fwd(x, k, False, values, indices)

    def no_reference(*_):
        raise NotImplementedError("timing only: compare with the authors' path")
    return Case(f"quack.topk_fwd[bf16 {m}x{n} k{k}]", jax_case, no_reference, torch_case,
                (1, 2), no_reference, authors_torch=authors)


def cases(size: str) -> list:
    """QuACK's top-k, then FA4's local-window and varlen+GQA forwards, at
    `size`."""
    b, s, h, left, right = LOCAL[size]
    seqs, seqlen, hq, hkv = VARLEN[size]
    total = seqs * seqlen
    return [
        topk_case(*TOPK[size]),
        _case("local", (b, s, h, HDIM), (b, s, h, HDIM), None, (left, right),
              f"fa4.fwd_local[bf16 B{b} S{s} H{h} D{HDIM} window ({left}, {right})]"),
        _case("varlen", (total, hq, HDIM), (total, hkv, HDIM),
              [i * seqlen for i in range(seqs + 1)], (seqlen, None),
              f"fa4.fwd_varlen_gqa[bf16 {seqs}x{seqlen} H{hq} Hkv{hkv} D{HDIM}]"),
    ]
