"""FlashAttention-4 in JAX: FA4's kernels as one differentiable function,
run by cutecall (no torch tensors, no TVM-FFI), on the GPU you compile for.

    from cutecall.attention import attention
    o = attention(q, k, v, causal=True)          # (B, S, H, D) bf16/fp16
    dq, dk, dv = jax.grad(lambda q, k, v: attention(q, k, v).sum(),
                          argnums=(0, 1, 2))(q, k, v)

Everything FA4's ``flash_attn_func`` and ``flash_attn_varlen_func`` offer:
packed variable-length sequences, sliding windows, softcap, ``score_mod`` /
``mask_mod`` callables with aux tensors and runtime aux scalars, paged KV
(decoding), split-KV decoding (sm100), learnable sinks, GQA/MQA, head dims
64 to 256 (and 192/128), ``return_lse``. See ``attention``.

Which kernels run follows the target, ``cutecall.current_target()`` when
``attention`` is called (``$CUTECALL_ARCH``, else the GPU, else sm_90a), as
FA4's interface picks them (:mod:`~cutecall.attention.archs`):

* sm_90a (H100, H200): FA4's sm90 classes;
* sm_100a, sm_103a (B200, GB200, B300): FA4's sm100 classes -- two Q tiles
  per CTA for prefill and one for decode, 2-CTA MMA in clusters of 2, the
  static persistent, LPT or CLC scheduler, S ping-pong, split-KV with FA4's
  combine kernel (``num_splits``), hd256's dedicated backward;
* sm_80, sm_86, sm_89 (A100, L40S): FA4's sm80 forward (FA4 has no sm8x
  backward); sm_120a, sm_121a (RTX 5090, GB10): its sm120 forward and
  backward.

What FA4 lacks on an arch raises a ValueError naming the option and the arch
(:mod:`~cutecall.attention.limits`). The caller changes nothing per arch.

How it is built (the template for wrapping any CuTe DSL library; see
``docs/attention.md``):

1. :mod:`~cutecall.attention.checks` validates the arguments
   (errors name the argument and value, before any compile) and picks a
   :class:`Config` (:mod:`~cutecall.attention.config`) for the target,
   with FA4's per-call choices (:mod:`~cutecall.attention.selection`);
2. :mod:`~cutecall.attention.kernel_objects` builds FA4's kernel objects
   exactly as ``flash_attn.cute.interface`` does for the arch, under the
   target's ``building()``, and :mod:`~cutecall.attention.kernels` wraps
   each in ``cutecall.cutlass_call`` (arguments bound by FA4's parameter
   names), output shapes following the arguments: one compile per Config
   serves every shape;
3. :func:`attention` pairs the forward with FA4's backward pipeline through
   ``cutecall.differentiable`` (preprocess, main backward, postprocess),
   with forward mode from :mod:`~cutecall.attention.jvp`.

FA4's block sparsity (``block_sparse_tensors=``, a :class:`BlockSparseTensors`)
is :mod:`~cutecall.attention.block_sparsity`.

Also here: :func:`block_sparse_attention` (cuDNN frontend's sm90
block-sparse attention, differentiable: :mod:`~cutecall.attention.block_sparse`),
:mod:`~cutecall.attention.reference` (float32 references and FA4-form
mods, for tests) and :mod:`~cutecall.attention.training` (a data-parallel
training step).

Requires ``flash-attn-4`` (the ``external`` extra) and the CuTe DSL.
"""

from __future__ import annotations

import functools
import math

from . import jvp as fj, kernels as fk
from .block_sparse import block_sparse_attention
from .block_sparsity import BlockSparseTensors, launch_tuple
from .checks import NAME, check
from .config import Config, aux_data
from .limits import backward_unsupported

__all__ = ["attention", "Config", "BlockSparseTensors", "block_sparse_attention"]


def attention(q, k, v, *, causal: bool = False, window_size=(None, None),
              softcap: float = 0.0, score_mod=None, score_mod_bwd=None,
              mask_mod=None, cu_seqlens_q=None, cu_seqlens_k=None,
              seqused_q=None, seqused_k=None, max_seqlen_q=None,
              max_seqlen_k=None, page_table=None, learnable_sink=None,
              aux_tensors=None, aux_scalars=None, scale=None,
              return_lse: bool = False, num_splits: int = 1,
              block_sparse_tensors=None, block_sparse_tensors_bwd=None):
    """Softmax attention ``softmax(scale * q k^T [+ mods, masks]) v`` with
    FA4's kernels for the target arch, differentiable in q, k, v (and
    learnable_sink).

    Example (packed sequences of lengths 5 and 300, a sliding window)::

        cu = jnp.array([0, 5, 305], jnp.int32)
        q = jnp.ones((305, 8, 128), jnp.bfloat16)        # (total, H, D)
        kv = jnp.ones((305, 2, 128), jnp.bfloat16)       # GQA: 2 KV heads
        o = attention(q, kv, kv, cu_seqlens_q=cu, cu_seqlens_k=cu,
                      causal=True, window_size=(128, 0))

    Args:
      q: (..., Sq, H, D) (leading dims are batch dims), or packed
        (total_q, H, D) with ``cu_seqlens_q``. bfloat16 or float16.
      k, v: (..., Sk, Hkv, D) / (..., Sk, Hkv, Dv), packed (total_k, Hkv, D)
        with ``cu_seqlens_k``, or a page pool (num_pages, page_size, Hkv, D)
        with ``page_table``. H a multiple of Hkv (GQA/MQA); (D, Dv) one of
        (64, 64), (96, 96), (128, 128), (192, 192), (256, 256), (192, 128)
        (sm100: not (192, 192); sm120: up to 192, FA4's tiles' shared memory).
      causal: mask keys after each query, aligned at the bottom right (FA4).
      window_size: (left, right) keys each query sees before/after its
        diagonal; ``None`` is unbounded. ``causal=True`` is right = 0, so
        ``causal=True, window_size=(w, None)`` is a causal sliding window.
        Window sizes are runtime values (no recompile per size).
      softcap: ``softcap * tanh(score / softcap)`` before softmax (0: off);
        FA4's own softcap score_mod, one compile per value.
      score_mod, score_mod_bwd, mask_mod: CuTe DSL callables in FA4's form
        (``score_mod(score, b, h, q_idx, kv_idx, seqlen_info, aux_tensors[,
        aux_scalars])``); ``score_mod_bwd`` is its derivative (needed for
        grad). Values they capture are compile-time (a new value is a new
        compile); pass runtime values in ``aux_scalars``. A mask_mod
        replaces ``causal`` and windows (FA4 ignores them; an error here).
      cu_seqlens_q, cu_seqlens_k: int32 (B + 1,) offsets of packed sequences.
      seqused_q, seqused_k: int32 (B,) lengths actually used per sequence.
      max_seqlen_q, max_seqlen_k: as in FA4 (Python ints): bounds FA4's
        sm100 scheduler and bucket choices read (default: the arrays'
        extents); sm90's kernels do not read them.
      page_table: int32 (B, max_pages) pages of each sequence in k/v's pool
        (decoding: q (B, Sq, H, D) with Sq small, lengths in ``seqused_k``).
        Forward only: FA4's backward has no paged KV.
      learnable_sink: (H,) float32/bf16/fp16 per-head sink logits (as in
        gpt-oss); differentiable.
      aux_tensors, aux_scalars: FA4's ``AuxData``: arrays and runtime
        scalars (Python numbers become Int32/Float32) the mods read. Not
        differentiated (FA4 computes no gradient for them).
      scale: the softmax scale (runtime); default ``D ** -0.5``.
      return_lse: also return the log-sum-exp, (..., H, Sq) float32 ((H,
        total_q) packed); it is differentiable too (FA4's dLSE path).
      num_splits: FA4's split-KV (sm100 only; dense q): 1 (FA4's default)
        runs one forward launch; n > 1 splits the keys n ways and runs FA4's
        combine kernel; 0 picks n by FA4's heuristic from the target
        device's SM count (decoding: few queries, many keys), and is 1 on
        the archs FA4 does not split on.
      block_sparse_tensors, block_sparse_tensors_bwd: FA4's block sparsity
        (FlexAttention's BlockMask), sm90 and sm100, dense layouts: a
        :class:`BlockSparseTensors` of int32 arrays per query block (the
        forward; kv blocks absent from both lists are skipped, "mask" blocks
        run ``mask_mod``, "full" blocks do not) and its transpose per kv
        block (the backward; without it FA4's backward runs dense with the
        mask_mod). Counts (B|1, H|1, blocks), indices (B|1, H|1, blocks, n);
        ``block_size`` (q, kv) is compile-time (sm100 prefill: q a multiple
        of 256), the arrays runtime (:mod:`~cutecall.attention.block_sparsity`).

    Returns:
      o: q's shape with Dv, q's dtype; ``(o, lse)`` with ``return_lse``.

    Under ``jax.vmap`` the dense layout folds into the batch (one launch);
    packed and paged layouts run once per example. Differentiating a case
    FA4's backward lacks on the arch (paged KV, a score_mod without
    score_mod_bwd; sm90: GQA with D != Dv; sm100 hd256: softcap, mods,
    windows, sinks, return_lse; sm80: any) raises a ValueError naming the
    option.

    Raises:
      ValueError: a bad argument (naming it and its value), or an option
        FA4 lacks on the target arch (naming both), before any compile.
    """
    import cutecall
    checked = check(q, k, v, causal=causal, window_size=window_size, softcap=softcap,
                    score_mod=score_mod, score_mod_bwd=score_mod_bwd, mask_mod=mask_mod,
                    cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                    seqused_q=seqused_q, seqused_k=seqused_k, max_seqlen_q=max_seqlen_q,
                    max_seqlen_k=max_seqlen_k, page_table=page_table,
                    learnable_sink=learnable_sink, aux_tensors=aux_tensors,
                    aux_scalars=aux_scalars, scale=scale, num_splits=num_splits,
                    target=cutecall.current_target(),
                    block_sparse_tensors=block_sparse_tensors,
                    block_sparse_tensors_bwd=block_sparse_tensors_bwd)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    lead = checked.lead
    if lead is not None and len(lead) != 1:  # fold (or add) the batch dims into one
        q, k, v = (x.reshape((-1,) + x.shape[-3:]) for x in (q, k, v))
        seqused_q, seqused_k = (None if x is None else x.reshape(-1)
                                for x in (seqused_q, seqused_k))
    scalars = tuple((type(s), s.value) for s in checked.aux_scalars or ())
    hints = checked.max_seqlen if checked.config.family == "sm100" else (None, None)
    f = _differentiable(checked.config, scale, checked.window, scalars, bool(return_lse),
                        hints)
    sparse = tuple(launch_tuple(t, q.shape[0], q.shape[-2])
                   for t in (block_sparse_tensors, block_sparse_tensors_bwd))
    out = f(q, k, v, learnable_sink, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
            page_table, tuple(aux_tensors) if aux_tensors is not None else None, *sparse)
    if lead is None or len(lead) == 1:
        return out
    o, lse = out if return_lse else (out, None)
    o = o.reshape(lead + o.shape[1:])
    return (o, lse.reshape(lead + lse.shape[1:])) if return_lse else o


@functools.lru_cache(maxsize=256)
def _differentiable(c: Config, scale: float, window: tuple, scalars: tuple,
                    return_lse: bool, max_seqlen: tuple = (None, None)):
    """The forward and FA4's backward pipeline as one
    ``cutecall.differentiable``, with forward mode from
    :mod:`~cutecall.attention.jvp`. Arguments: (q, k, v, sink, cu_q, cu_k, seqused_q, seqused_k,
    page_table, aux_tensors); only q, k, v and sink get cotangents. `max_seqlen`:
    the (q, k) hints as given (sm100's kernels read them)."""
    import cutecall
    left, right = window
    aux_scalars = tuple(t(value) for t, value in scalars) or None

    def forward(q, k, v, sink, cu_q, cu_k, used_q, used_k, pages, aux, sparse=None,
                _sparse_bwd=None):
        kw = {} if sparse is None else dict(sparse=sparse)
        return fk.forward(c)(q, k, v, scale, cu_q, cu_k, used_q, used_k, pages,
                             left, right, sink, aux_data(aux, aux_scalars),
                             max_seqlen_q=max_seqlen[0], **kw)

    def primal(*args):
        o, lse = forward(*args)
        return (o, lse) if return_lse else o

    def fwd(*args):  # runs only when differentiating: FA4's limits apply
        reason = backward_unsupported(c, return_lse)
        if reason is not None:
            raise ValueError(f"{NAME}: cannot differentiate (grad, vjp or jvp): {reason}")
        o, lse = forward(*args)
        return ((o, lse) if return_lse else o), (args, o, lse)

    def bwd(res, cts):
        return _backward(c, scale, window, aux_scalars, max_seqlen, res,
                         cts if return_lse else (cts, None))

    # Forward mode (jax.jvp, linearize, jacfwd): FA4's forward for P v' and
    # the score tangent in XLA (cutecall.attention.jvp); grad keeps bwd.
    return cutecall.differentiable(primal).defvjp(fwd, bwd).defjvp(
        fj.jvp_rule(c, scale, window_size=window, forward=forward, return_lse=return_lse))


def _backward(c: Config, scale: float, window: tuple, aux_scalars, max_seqlen: tuple,
              res, cts) -> tuple:
    """FA4's backward pipeline: the preprocess, the main kernel, the
    postprocess of the float32 accumulators (dQ; GQA's dK and dV) -- none
    after sm100's hd256 kernel, which writes dQ, dK and dV itself."""
    import jax.numpy as jnp
    (q, k, v, sink, cu_q, cu_k, used_q, used_k, _pages, aux, _sparse, sparse), o, lse = res
    (do, dlse), (left, right) = cts, window
    aux = aux_data(aux, aux_scalars)
    dpsum, lse_log2, dq_accum = fk.preprocess(c, dlse is not None)(
        o, do, lse, cu_q, used_q, dlse)
    gqa = c.qhead_per_kvhead > 1 and not c.bwd_hd256
    dk_acc = dv_acc = None
    if gqa:
        batch = cu_k.shape[0] - 1 if c.cu_seqlens_k else k.shape[0]
        seqlen_k = k.shape[0] if c.cu_seqlens_k else k.shape[1]
        dk_acc, dv_acc = (jnp.zeros(s, jnp.float32) for s in
                          c.dkv_accum_shapes(batch, seqlen_k, k.shape[-2]))
    dq_accum, dk, dv = fk.backward(c)(
        q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc, scale,
        cu_q, cu_k, used_q, used_k, left, right, aux, max_seqlen=max_seqlen, sparse=sparse)
    rest = (None,) * 8  # no cotangents for cu_q .. sparse_bwd
    if c.bwd_hd256:
        return dq_accum, dk, dv, None, *rest
    post_dq = functools.partial(fk.postprocess(c, "dq"), dq_accum, q, scale, cu_q, used_q)
    # With a sink, FA4 reduces dsink in the same dQ postprocess launch.
    dq, dsink = (post_dq(), None) if sink is None else post_dq(sink=(dpsum, lse, sink))
    if gqa:
        dk = fk.postprocess(c, "dkv")(dk, k, scale, cu_k, used_k)
        dv = fk.postprocess(c, "dkv" if c.dv == c.hdim else "dv")(dv, v, 1.0, cu_k, used_k)
    return dq, dk, dv, dsink, *rest
