"""The paths ``bench/attention/run.py`` times, as callables on a
:class:`shapes.Shape`'s inputs:

  cutecall   ``cutecall.attention.attention`` (FA4's sm90
             kernels from JAX); varlen through ``cu_seqlens_q/k`` and
             ``max_seqlen_q/k``, decode through ``page_table`` and
             ``seqused_k`` (paged KV)
  fa4_jax    fa4-jax 0.1.0's ``flash_attn`` / ``flash_attn_varlen`` (FA4's
             kernels vendored, through cutejax and jax-tvm-ffi); decode on a
             plain KV cache (no paging)
  fa4_torch  FA4's own ``flash_attn_func`` / ``flash_attn_varlen_func`` on
             torch tensors that share the JAX arrays' memory (DLPack);
             decode through ``page_table``
  cudnn, xla ``jax.nn.dot_product_attention(implementation=...)``; varlen
             on a zero-padded batch with ``query_seq_lengths`` /
             ``key_value_seq_lengths``; decode on a plain KV cache

JAX paths return ``(fn, args)``: ``fn(*args)`` is one call (forward, or
forward + VJP), timed as a chain of calls in one ``jit``. The torch path
returns a no-argument function. fa4-jax needs jax-tvm-ffi 0.1.2 while the
wheel site holds 0.1.3 (bench/overhead's path d): on the GPU machine its
own site (``$FA4JAX_SITE``, default ``/tmp/fa4jax_site``, made by
``tools/gpu/gpu setup``) comes first on ``PYTHONPATH`` when ``tools/gpu/gpu
bench attention`` runs. Nothing else this benchmark imports loads
jax-tvm-ffi, so the paths share one process.
"""

from __future__ import annotations

PATHS = ("cutecall", "fa4_jax", "fa4_torch", "cudnn", "xla")


def import_fa4_jax():
    """fa4_jax with its cute backend (cutejax, jax_tvm_ffi), from wherever
    Python finds it (on the GPU machine: ``$FA4JAX_SITE``, first on
    ``PYTHONPATH``)."""
    import fa4_jax
    import fa4_jax.kernels  # noqa: F401  (the cute backend: cutejax, jax_tvm_ffi)
    return fa4_jax


def _random(key, shape):
    import jax
    import jax.numpy as jnp
    return jax.random.normal(key, shape, jnp.float32).astype(jnp.bfloat16)


def jax_inputs(shape, padded: bool) -> dict:
    """The shape's arrays (bf16 normal; int32 offsets, lengths, pages).
    dense: q k v do (B, S, H, D). varlen: q k v do packed (T, H, D) and
    ``cu`` (B + 1,); with ``padded`` also qp kp vp dop (B, max S, H, D),
    zero past each length, and ``lens`` (B,). decode: q (B, Sq, H, D), k v
    (B, Sk, Hkv, D), k_pages v_pages (B·Sk / page, page, Hkv, D) holding
    the same tokens in shuffled pages, ``page_table`` (B, Sk / page) and
    ``seqused_k`` (B,)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    keys = jax.random.split(jax.random.key(0), 4)
    s, b, h, hkv, d = shape, shape.batch, shape.heads, shape.heads_kv, shape.d
    if s.set == "dense":
        return dict(zip("q k v do".split(), (_random(kk, (b, s.seqlen, h, d)) for kk in keys)))
    if s.set == "varlen":
        total = sum(s.lengths)
        x = dict(zip("q k v do".split(), (_random(kk, (total, h, d)) for kk in keys)))
        offsets = np.concatenate([[0], np.cumsum(s.lengths)]).astype(np.int32)
        x["cu"] = jnp.asarray(offsets)
        if padded:
            m = s.max_seqlen
            rows = np.concatenate([np.arange(n) + i * m for i, n in enumerate(s.lengths)])
            for name in "q k v do".split():
                pad = jnp.zeros((b * m, h, d), jnp.bfloat16).at[rows].set(x[name])
                x[name + "p"] = pad.reshape(b, m, h, d)
            x["lens"] = jnp.asarray(np.asarray(s.lengths, np.int32))
        return x
    sq, sk, page = s.seqlen_q, s.seqlen, s.page_size
    x = {"q": _random(keys[0], (b, sq, h, d)), "k": _random(keys[1], (b, sk, hkv, d)),
         "v": _random(keys[2], (b, sk, hkv, d))}
    pages = b * sk // page
    perm = np.random.default_rng(0).permutation(pages).astype(np.int32)
    for name in "kv":  # page j of the plain cache sits at perm[j]
        flat = x[name].reshape(pages, page, hkv, d)
        x[name + "_pages"] = jnp.zeros_like(flat).at[perm].set(flat)
    x["page_table"] = jnp.asarray(perm.reshape(b, sk // page))
    x["seqused_k"] = jnp.full((b,), sk, jnp.int32)
    return x


def _attention_fn(path: str, shape):
    """(f, extra names): ``f(q, k, v, *extra)`` is the path's forward on
    the shape, extra the non-differentiated inputs it takes."""
    import jax

    c, m = shape.causal, shape.max_seqlen
    if path == "cutecall":
        from cutecall.attention import attention
        if shape.set == "varlen":
            return (lambda q, k, v, cu: attention(
                q, k, v, causal=c, cu_seqlens_q=cu, cu_seqlens_k=cu,
                max_seqlen_q=m, max_seqlen_k=m)), ("cu",)
        if shape.set == "decode":
            return (lambda q, k, v, pt, su: attention(
                q, k, v, causal=c, page_table=pt, seqused_k=su)), ("page_table", "seqused_k")
        return (lambda q, k, v: attention(q, k, v, causal=c)), ()
    if path == "fa4_jax":
        fa4 = import_fa4_jax()
        if shape.set == "varlen":
            return (lambda q, k, v, cu: fa4.flash_attn_varlen(q, k, v, cu, cu, causal=c)), ("cu",)
        return (lambda q, k, v: fa4.flash_attn(q, k, v, causal=c)), ()
    if path not in ("cudnn", "xla"):
        raise ValueError(f"no JAX path {path!r}")
    if shape.set == "varlen":
        return (lambda q, k, v, lens: jax.nn.dot_product_attention(
            q, k, v, is_causal=c, query_seq_lengths=lens, key_value_seq_lengths=lens,
            implementation=path)), ("lens",)
    return (lambda q, k, v: jax.nn.dot_product_attention(
        q, k, v, is_causal=c, implementation=path)), ()


def jax_call(path: str, shape, mode: str, x: dict):
    """(fn, args) of one call of a JAX path: the forward, or with
    ``mode="fwd_bwd"`` the forward and its VJP (dq, dk, dv) at ``do``."""
    import jax

    f, extra = _attention_fn(path, shape)
    if shape.set == "varlen" and path in ("cudnn", "xla"):
        qkv, do = (x["qp"], x["kp"], x["vp"]), x["dop"]
    elif shape.set == "decode" and path == "cutecall":
        qkv, do = (x["q"], x["k_pages"], x["v_pages"]), None
    else:
        qkv, do = (x["q"], x["k"], x["v"]), x.get("do")
    args = (*qkv, do, *(x[n] for n in extra))
    if mode == "fwd":
        return (lambda q, k, v, do, *e: f(q, k, v, *e)), args
    return (lambda q, k, v, do, *e: jax.vjp(lambda q, k, v: f(q, k, v, *e), q, k, v)[1](do)), args


def torch_inputs(x: dict) -> dict:
    """The JAX arrays as torch tensors on the same memory (DLPack)."""
    import jax
    import torch

    jax.block_until_ready(x)
    return {name: torch.from_dlpack(a) for name, a in x.items()}


def torch_call(shape, mode: str, t: dict):
    """One call of FA4's torch path. Forward + backward returns the
    gradients (``torch.autograd.grad``, as a VJP does) rather than
    accumulating into ``.grad``, which would add a kernel per gradient."""
    import torch
    from flash_attn.cute import flash_attn_func, flash_attn_varlen_func

    c, m = shape.causal, shape.max_seqlen
    if shape.set == "decode":
        def run():
            with torch.no_grad():
                flash_attn_varlen_func(t["q"], t["k_pages"], t["v_pages"], causal=c,
                                       page_table=t["page_table"], seqused_k=t["seqused_k"])
        return run
    if shape.set == "varlen":
        def f(q, k, v):
            return flash_attn_varlen_func(q, k, v, cu_seqlens_q=t["cu"], cu_seqlens_k=t["cu"],
                                          max_seqlen_q=m, max_seqlen_k=m, causal=c)
    else:
        def f(q, k, v):
            return flash_attn_func(q, k, v, causal=c)
    if mode == "fwd":
        def run():
            with torch.no_grad():
                f(t["q"], t["k"], t["v"])
        return run
    qkv = tuple(t[n].detach().requires_grad_() for n in "qkv")

    def run():
        out = f(*qkv)
        out = out[0] if isinstance(out, tuple) else out
        torch.autograd.grad(out, qkv, t["do"])
    return run
