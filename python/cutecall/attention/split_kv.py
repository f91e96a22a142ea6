"""FlashAttention-4's split-KV forward on sm100, as ``_flash_attn_fwd``
runs it when ``num_splits > 1``: the forward kernel writes float32
partial outputs and LSEs, one per split of the keys, and FA4's combine
kernel (``FlashAttentionForwardCombine``) reduces them into o and lse.

Layouts, as FA4 allocates them: ``out_partial`` (splits, B, Sq, H, Dv)
and ``lse_partial`` (splits, B, H, Sq), float32; the combine reads
``lse_partial`` and writes lse (B, H, Sq) through (…, Sq, H) views, which
cutecall passes as ``TensorSpec(mode=...)`` (no copy). Dense q only:
FA4 plans packed or ``seqused_q`` split-KV with its scheduler-metadata
kernel (``limits.check_forward`` says so).
"""

from __future__ import annotations

import functools

from .config import Config
from .kernel_objects import combine_kernel, forward_kernel
from .specs import F32, HALF, batching, by_name, forward_args, optional, ranks, sds, site, specs

OUTPUTS = ("mO", "mLSE")


@functools.lru_cache(maxsize=64)
def forward(c: Config):
    """``kernels.forward``'s call for ``c.num_splits > 1``: the split
    forward, then the combine (two launches)."""
    n = c.num_splits

    def outputs(q, *_):
        b, s, h, _d = q.shape
        return sds((n, b, s, h, c.dv), "float32"), sds((n, b, h, s), "float32")

    modes = [0, 0, 0] + optional(c.seqused_k) + \
        [None] * (bool(c.sink_dtype) + max(c.aux_tensors, 0))
    _, rk, _, _ = ranks(c)
    absent = sum((c.cu_seqlens_k, c.seqused_k, c.paged_kv, bool(c.sink_dtype))) + \
        max(c.aux_tensors, 0)
    s = site("fwd", c, lambda: forward_kernel(c), output_shape_dtype=outputs,
             output_params=OUTPUTS, batch_modes=batching(c, modes, (1, 1)),
             **specs([(4, HALF), (rk, HALF), (rk, HALF)] + [None] * absent, [(5, F32), None]),
             name=f"fa4_fwd_{c.tag()}")

    def run(q, *args, **kw):
        o_partial, lse_partial = s.call(*forward_args(c, s, OUTPUTS, q, *args, **kw))
        return combine(c, q.shape[-2])(o_partial, lse_partial)
    return run


@functools.lru_cache(maxsize=64)
def combine(c: Config, heads: int):
    """``(out_partial, lse_partial) -> (o, lse)``: FA4's combine for `heads`
    query heads (a constructor value of its kernel), as
    ``_flash_attn_fwd_combine`` calls it (no varlen, no dynamic splits)."""
    import cutecall

    def outputs(o_partial, *_):
        _n, b, s, h, dv = o_partial.shape
        return sds((b, s, h, dv), c.dtype), sds((b, h, s), "float32")

    s = site(("combine", heads), c, lambda: combine_kernel(c, heads),
             output_shape_dtype=outputs, output_params=OUTPUTS,
             batch_modes=cutecall.BatchModes(inputs=(1, 1), outputs=(0, 0)),
             **specs([(5, F32), (4, 1, (0, 1, 3, 2))], [(4, HALF), (3, 1, (0, 2, 1))]),
             name=f"fa4_fwd_combine_{c.tag()}_h{heads}")
    return lambda o_partial, lse_partial: s.call(*by_name(
        s, OUTPUTS, mO_partial=o_partial, mLSE_partial=lse_partial, cu_seqlens=None,
        seqused=None, num_splits_dynamic_ptr=None, virtual_batch_idx=None,
        semaphore_to_reset=None))
