"""FlashAttention-4's kernels as ``cutlass_call``s, for the arch a
:class:`Config` targets (sm90, sm100/sm103, sm80/sm120), built as FA4's own
``flash_attn.cute.interface`` builds them (:mod:`~cutecall.attention.
kernel_objects`) and called with FA4's launcher arguments, bound by the
launchers' parameter names (:func:`~cutecall.attention.specs.by_name`).

:mod:`cutecall.attention` composes them into a differentiable
attention. Everything here is keyed by a :class:`Config`
(:mod:`~cutecall.attention.config`): FA4's kernel objects
depend on nothing else, so one compile per config serves every batch,
sequence length, head count and window size (cutecall keeps extents
dynamic; window sizes, the softmax scale and aux scalars are runtime
values). Split-KV forwards are in :mod:`~cutecall.attention.split_kv`.

FA4, the CuTe DSL and JAX are imported when a function runs.
"""

from __future__ import annotations

import functools

from .config import ARCH, DTYPES, Config, aux_data  # noqa: F401 (public names)
from .kernel_objects import (backward_kernel, combine_kernel, forward_kernel,  # noqa: F401
                             postprocess_kernel, preprocess_kernel)
from .specs import (F32, HALF, backward_args, batching, by_name, forward_args, optional,
                    ranks, sds, site, sparse_leaves, specs)

__all__ = ["Config", "forward_kernel", "preprocess_kernel", "backward_kernel",
           "postprocess_kernel", "combine_kernel", "forward", "preprocess",
           "backward", "postprocess"]


@functools.lru_cache(maxsize=64)
def forward(c: Config):
    """``(q, k, v, scale, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
    page_table, window_left, window_right, learnable_sink, aux,
    max_seqlen_q=None, sparse=None) -> (o, lse)``: FA4's launcher arguments
    (``None`` where absent; `sparse`: FA4's blocksparse tuple). lse is (B,
    H, Sq) float32, or (H, total_q) with cu_seqlens_q. With ``c.num_splits
    > 1``: FA4's split-KV forward and its combine kernel."""
    if c.num_splits > 1:
        from . import split_kv
        return split_kv.forward(c)

    def outputs(q, k, v, *_):
        o = sds(q.shape[:-1] + (c.dv,), q.dtype)
        if c.cu_seqlens_q:
            return o, sds((q.shape[1], q.shape[0]), "float32")
        b, s, h, _d = q.shape
        return o, sds((b, h, s), "float32")

    n_sparse = sparse_leaves(c.sparse_block)
    modes = [0, 0, 0] + optional(c.seqused_q, c.seqused_k) + [None] * bool(c.sink_dtype) + \
        [0] * n_sparse + [None] * max(c.aux_tensors, 0)
    rq, rk, _, _ = ranks(c)
    absent = sum((c.cu_seqlens_q, c.cu_seqlens_k, c.seqused_q, c.seqused_k, c.paged_kv,
                  bool(c.sink_dtype))) + max(c.aux_tensors, 0) + n_sparse
    s = site("fwd", c, lambda: forward_kernel(c), output_shape_dtype=outputs,
             output_params=("mO", "mLSE"), batch_modes=batching(c, modes, 2),
             **specs([(rq, HALF), (rk, HALF), (rk, HALF)] + [None] * absent,
                     [(rq, HALF), None]), name=f"fa4_fwd_{c.tag()}")
    return lambda *args, **kw: s.call(*forward_args(c, s, ("mO", "mLSE"), *args, **kw))


@functools.lru_cache(maxsize=64)
def preprocess(c: Config, with_dlse: bool):
    """``(o, do, lse, cu_seqlens_q, seqused_q, dlse) -> (dpsum, lse_log2,
    dq_accum)``: the statistics and the zeroed dQ accumulator
    (:meth:`Config.accum_shapes`); ``dq_accum`` is None for sm100's hd256
    backward, which writes dQ itself."""
    accum = not c.bwd_hd256

    def outputs(o, do, lse, cu_q, *_):
        batch = cu_q.shape[0] - 1 if c.cu_seqlens_q else o.shape[0]
        seqlen = o.shape[0] if c.cu_seqlens_q else o.shape[1]
        stat, acc = c.accum_shapes(batch, seqlen, o.shape[-2])
        return (sds(stat, "float32"), sds(stat, "float32")) + \
            ((sds(acc, "float32"),) if accum else ())
    names = ("mPdPsum", "mLSElog2") + (("mdQaccum",) if accum else ())
    modes = [0, 0, 0] + optional(c.seqused_q, with_dlse)
    rq, _, rs, _ = ranks(c)
    absent = sum((c.cu_seqlens_q, c.seqused_q, with_dlse))
    s = site(("pre", with_dlse), c, lambda: preprocess_kernel(c), output_shape_dtype=outputs,
             output_params=names, batch_modes=batching(c, modes, len(names)),
             **specs([(rq, HALF), (rq, HALF), None] + [None] * absent,
                     [(rs, F32)] * len(names)), name=f"fa4_bwd_preprocess_{c.tag()}")

    def run(o, do, lse, cu_q, used_q, dlse):
        out = s.call(*by_name(s, names, mO=o, mdO=do, mLSE=lse, mCuSeqlensQ=cu_q,
                              mSeqUsedQ=used_q, mdLSE=dlse, mRowMax=None, mScaleP=None,
                              softmax_scale=1.0))
        return tuple(out) if accum else (*out, None)
    return run


@functools.lru_cache(maxsize=64)
def backward(c: Config):
    """``(q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, scale,
    cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, window_left,
    window_right, aux, max_seqlen=(None, None), sparse=None) -> (dq_accum,
    dk, dv)`` (`sparse`: the backward's blocksparse tuple).
    MHA writes dK and dV (pass ``None`` for the accumulators); GQA
    accumulates them into float32 buffers the caller zeroes
    (:meth:`Config.dkv_accum_shapes`), converted by the postprocess.
    sm100's hd256 kernel writes dQ, dK and dV (no accumulators) and reads
    the max_seqlen hints of packed sequences."""
    if c.bwd_hd256:
        return _backward_hd256(c)
    gqa = c.qhead_per_kvhead > 1

    def outputs(q, k, v, do, lse_log2, dpsum, dq_accum, *rest):
        if gqa:  # rest: dk_acc, dv_acc, ...
            return (sds(dq_accum.shape, "float32"), sds(rest[0].shape, "float32"),
                    sds(rest[1].shape, "float32"))
        return (sds(dq_accum.shape, "float32"), sds(k.shape, k.dtype),
                sds(v.shape, v.dtype))
    n_sparse = sparse_leaves(c.sparse_bwd_block)
    modes = [0] * (9 if gqa else 7) + \
        optional(c.seqused_q, c.seqused_k) + [None] * max(c.aux_tensors, 0) + [0] * n_sparse
    rq, rk, rs, ra = ranks(c)
    accs = [(ra, F32)] * 2 if gqa else []
    absent = sum((c.cu_seqlens_q, c.cu_seqlens_k, c.seqused_q, c.seqused_k)) + \
        max(c.aux_tensors, 0) + n_sparse
    out_names = () if gqa else ("mdK", "mdV")
    s = site("bwd", c, lambda: backward_kernel(c), output_shape_dtype=outputs,
             input_output_aliases={6: 0, 7: 1, 8: 2} if gqa else {6: 0},
             output_params=out_names or None, batch_modes=batching(c, modes, 3),
             **specs([(rq, HALF), (rk, HALF), (rk, HALF), (rq, HALF)] + [(rs, F32)] * 3 +
                     accs + [None] * absent, [(rs, F32)] + (accs or [(rk, HALF)] * 2)),
             name=f"fa4_bwd_{c.tag()}")

    def run(q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, *tail, max_seqlen=None,
            sparse=None):
        return s.call(*backward_args(s, out_names, q, k, v, do, lse_log2, dpsum, dq_accum,
                                     dk_acc, dv_acc, *tail, sparse=sparse))
    return run


def _backward_hd256(c: Config):
    """sm100's hd256 backward: FA4's dedicated kernel writes dQ (at the
    dQ accumulator's parameter), dK and dV, and takes packed sequences'
    max_seqlen hints as FA4 passes them (None when not given)."""
    modes = [0] * 6 + optional(c.seqused_q, c.seqused_k)
    rq, rk, rs, _ = ranks(c)
    absent = sum((c.cu_seqlens_q, c.cu_seqlens_k, c.seqused_q, c.seqused_k))
    names = ("dQ_accum", "dK", "dV")
    s = site("bwd", c, lambda: backward_kernel(c),
             output_shape_dtype=lambda q, k, v, *_: (sds(q.shape, q.dtype),
                                                     sds(k.shape, k.dtype),
                                                     sds(v.shape, v.dtype)),
             output_params=names, batch_modes=batching(c, modes, 3),
             **specs([(rq, HALF), (rk, HALF), (rk, HALF), (rq, HALF)] + [(rs, F32)] * 2 +
                     [None] * absent, [(rq, HALF), (rk, HALF), (rk, HALF)]),
             name=f"fa4_bwd_{c.tag()}")

    def run(q, k, v, do, lse_log2, dpsum, _dq_accum, _dk_acc, _dv_acc, scale, cu_q, cu_k,
            used_q, used_k, left, right, aux, max_seqlen=(None, None), sparse=None):
        hint_q, hint_k = max_seqlen or (None, None)
        return s.call(*by_name(
            s, names, Q=q, K=k, V=v, dO=do, lse_log2=lse_log2, dpsum=dpsum,
            scale_softmax=scale, cumulative_s_q=cu_q, cumulative_s_k=cu_k, seqused_q=used_q,
            seqused_k=used_k, window_size_left=left, window_size_right=right, aux_data=aux,
            max_seqlen_q=hint_q if c.cu_seqlens_q else None,
            max_seqlen_k=hint_k if c.cu_seqlens_k else None))
    return run


def postprocess(c: Config, which: str):
    """``(accum, like, scale, cu_seqlens, seqused, sink) -> out`` (``like``
    gives out's shape and dtype); with ``sink = (dpsum, lse,
    learnable_sink)`` (dQ only) it returns ``(out, dsink)``, FA4 reducing
    the sink's gradient in the same launch. ``which``: "dq", "dkv" or "dv"
    (:func:`~cutecall.attention.kernel_objects.postprocess_kernel`)."""
    def run(accum, like, scale, cu, used, sink=None):
        s = _postprocess(c, which, tuple(like.shape), str(like.dtype), sink is not None)
        named = dict(mdQaccum=accum, scale=scale, mCuSeqlensQ=cu, mSeqUsedQ=used)
        if sink is None:
            return s.call(*by_name(s, ("mdQ",), **named, sink_tensors=None))
        from flash_attn.cute.flash_bwd_postprocess import LearnableSinkBwdTensors
        import jax.numpy as jnp
        dpsum, lse, learnable = sink
        tensors = LearnableSinkBwdTensors(dpsum, lse, learnable,
                                          jnp.zeros(learnable.shape, learnable.dtype))
        return s.call(*by_name(s, ("mdQ",), **named, sink_tensors=tensors))
    return run


@functools.lru_cache(maxsize=256)
def _postprocess(c: Config, which: str, shape: tuple, dtype: str, sink: bool):
    # One call object per output shape (the launcher's arguments do not say
    # it); they share one compiled kernel, whose extents are dynamic.
    out = sds(shape, dtype)
    dq = which == "dq"
    varlen = c.cu_seqlens_q if dq else c.cu_seqlens_k
    used = c.seqused_q if dq else c.seqused_k
    modes = [0] + optional(used)
    rank_out = ranks(c)[0 if dq else 1]
    rank_acc = ranks(c)[2 if dq else 3]
    ins = [(rank_acc, F32)] + [None] * sum((varlen, used))
    name = f"fa4_bwd_postprocess_{which}_{c.tag()}"
    role, build = ("post", which, sink), lambda: postprocess_kernel(c, which)
    if sink:
        return site(
            role, c, build,
            output_shape_dtype=lambda acc, scale, cu, u, st: (out, sds(st.sink.shape,
                                                                        st.sink.dtype)),
            input_output_aliases={(4, "dsink"): 1}, output_params=("mdQ",),
            batch_modes="loop",  # dsink sums over the batch: no fold
            **specs(ins + [(rank_acc, F32), None, None, None], [(rank_out, HALF), None]),
            name=name)
    return site(role, c, build, output_shape_dtype=out, output_params=("mdQ",),
                batch_modes="loop" if varlen else batching(c, modes, 1),
                **specs(ins, [(rank_out, HALF)]), name=name)
