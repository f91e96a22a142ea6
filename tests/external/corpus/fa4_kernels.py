"""FA4's Hopper kernel objects for the corpus (bf16, MHA), built by
:mod:`cutecall.attention.kernels` as
``flash_attn.cute.interface`` builds them, and FA4's own launch paths for
them (``Case.authors_torch``).

Imports of FA4, the CuTe DSL and torch happen when a function is called.
Each builder returns a new object, as FA4 builds one per compile: FA4's
``__call__`` stores what it traces (layouts, copy atoms) on the object.
"""

from __future__ import annotations

from cutecall.attention import kernels as fk

HDIM = 128
ARCH = fk.ARCH


def _config(causal: bool, hdim: int):
    return fk.Config("bfloat16", hdim, 1, causal)


def bwd_config(causal: bool, hdim: int = HDIM):
    """FA4's sm90 backward config (``interface._tile_size_bwd_sm90``)."""
    return _config(causal, hdim).bwd


def fwd_kernel(causal: bool, hdim: int = HDIM):
    """``FlashAttentionForwardSm90`` as ``interface._flash_attn_fwd`` builds
    it for arch 9x, MHA (``cutecall.attention.kernels.forward_kernel``)."""
    return fk.forward_kernel(_config(causal, hdim))


def preprocess_kernel(causal: bool, hdim: int = HDIM):
    """``FlashAttentionBackwardPreprocess`` as ``_flash_attn_bwd`` builds it."""
    return fk.preprocess_kernel(_config(causal, hdim))


def backward_kernel(causal: bool, hdim: int = HDIM):
    """``FlashAttentionBackwardSm90`` as ``_flash_attn_bwd`` builds it for
    arch 9x (hdim 128: tile 80x128 with dQ_swapAB, or 64x128 causal)."""
    return fk.backward_kernel(_config(causal, hdim))


def postprocess_kernel(causal: bool, hdim: int = HDIM):
    """``FlashAttentionBackwardPostprocess`` for dQ, as
    ``_bwd_postprocess_convert`` builds it on arch 90."""
    return fk.postprocess_kernel(_config(causal, hdim), "dq")


def accum_shapes(batch: int, seqlen: int, heads: int, causal: bool,
                 hdim: int = HDIM):
    """((B, H, Sr), (B, H, Sr * Dr)): ``Config.accum_shapes``."""
    return _config(causal, hdim).accum_shapes(batch, seqlen, heads)


# ---------------------------------------------------------------------------
# FA4's own launch paths (GPU): each writes the outputs of the case's torch
# arguments, which follow the launcher's parameter order.

def authors_forward(causal: bool):
    """``interface._flash_attn_fwd`` with ``out=`` and ``lse=``."""
    def run(q, k, v, out, lse, softmax_scale):
        from flash_attn.cute import interface
        interface._flash_attn_fwd(q, k, v, softmax_scale=softmax_scale,
                                  causal=causal, out=out, lse=lse)
    return run


def authors_preprocess(causal: bool, hdim: int = HDIM):
    """``interface._bwd_preprocess``, as ``_flash_attn_bwd`` calls it."""
    def run(out, dout, dpsum, lse, lse_log2, dq_accum, *_):
        import cutlass
        from flash_attn.cute import interface
        c = _config(causal, hdim)
        interface._bwd_preprocess(
            out, dout, dpsum, lse, lse_log2, dq_accum, None, None, None,
            cutlass.BFloat16, hdim, hdim, c.bwd.m_block_size,
            hdim_multiple_of=c.hdim_multiple_of, fake_mode=False)
    return run


def authors_backward(causal: bool, hdim: int = HDIM):
    """The main backward kernel compiled as ``_flash_attn_bwd`` compiles it
    for arch 9x (``to_cute_tensor`` of the tensors, TVM-FFI, a fake env
    stream) and called with its argument list; FA4 has no entry point that
    runs this kernel alone."""
    compiled = {}

    def run(q, k, v, dout, lse_log2, dpsum, dq_accum, dk, dv, softmax_scale):
        import cutlass.cute as cute
        from flash_attn.cute.cute_dsl_utils import to_cute_tensor
        from flash_attn.cute.utils import AuxData
        if "fn" not in compiled:
            tensors = [to_cute_tensor(t) for t in
                       (q, k, v, dout, lse_log2, dpsum, dq_accum, dk, dv)]
            stream = cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True)
            compiled["fn"] = cute.compile(
                backward_kernel(causal, hdim), *tensors, softmax_scale,
                None, None, None, None, None, None, None, None, None,
                AuxData(None, None), None, None, stream,
                options="--enable-tvm-ffi")
        compiled["fn"](q, k, v, dout, lse_log2, dpsum, dq_accum, dk, dv,
                       softmax_scale, None, None, None, None, None, None, None,
                       None, None, AuxData(None, None), None, None)
    return run


def authors_postprocess(causal: bool, hdim: int = HDIM):
    """``interface._bwd_postprocess_convert`` for dQ, as ``_flash_attn_bwd``
    calls it on arch 90."""
    def run(dq_accum, dq, scale, *_):
        import cutlass
        from flash_attn.cute import interface
        c = _config(causal, hdim)
        cfg = c.bwd
        interface._bwd_postprocess_convert(
            dq_accum, dq, scale, None, None, 90, cutlass.BFloat16, hdim,
            cfg.m_block_size, c.dq_post_threads, cfg.AtomLayoutMdQ,
            cfg.dQ_swapAB, use_2cta_instrs=False, cluster_size=1,
            cu_total_m_blocks=None, sink_tensors=None,
            hdim_multiple_of=c.hdim_multiple_of, accum_order=None,
            fake_mode=False)
    return run

