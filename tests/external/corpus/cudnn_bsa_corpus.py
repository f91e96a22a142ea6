"""cuDNN frontend 1.32's Hopper block-sparse attention forward
(``cudnn.block_sparse_attention``, sm90, 128-token blocks), called the way
cuDNN calls it.

cuDNN's path (``_interface._bsa_attn_fwd_sm90_blk128``, what
``bsa_attn_fwd(q, k, v, indices, count, sparse_block_size=128)`` runs on
an H100/H200)::

    kernel = BlockSparseAttnForwardSm90Blk128(d, dv, gqa, False, 0, 1, 2,
                                              False, has_kv_tail)
    args = (q.permute(2, 3, 1, 0), k.permute(2, 3, 1, 0),   # q, k, v BHSD
            v.permute(3, 2, 1, 0), out.permute(2, 3, 1, 0),
            lse.permute(2, 1, 0), indices.permute(3, 2, 1, 0),
            indices, indices)            # counts, sizes: unused (fixed count)
    compiled = cute.compile(kernel, *dynamic(args), Float32(1.0), Int32(0),
                            make_fake_stream(...), options="--enable-tvm-ffi")
    compiled(*args, d ** -0.5, count, stream)

The outputs ``o`` and ``lse`` sit between the inputs. The case hands
cuDNN's kernel object to cutecall unchanged, with no output names::

    kernel(*args, scale, count)            # torch: the permuted views
    call(q, k, v, indices, indices, indices, scale, count)   # JAX: (o, lse)

JAX arrays are BHSD as cuDNN's users hold them; ``TensorSpec(mode=...)``
gives the kernel cuDNN's permuted views (no copy). cuDNN's own JAX path
(``cudnn.block_sparse_attention.jax_api``) compiles its sm100 kernel for
``sm_100a`` only; this runs the sm90 one from JAX.

Indices: q block ``i`` attends to kv blocks ``(i + j * step) % nk`` for ``j
< count`` (distinct), every batch and head.

Shapes (b, h, s, d, count): ``"test"`` (1, 2, 512, 128, 2); ``"bench"``
(2, 16, 4096, 128, 8) -- 25% of the blocks (the dense XLA yardstick holds
(2, 16, 4096, 4096) float32 logits).
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import JaxRandom, TorchRandom, bf16

__all__ = ["KERNELS", "SHAPES", "cases", "case", "jax_args_from_torch", "as_jax_layout"]

KERNELS = ("bsa_fwd_sm90",)
SHAPES = {"test": {"bsa_fwd_sm90": (1, 2, 512, 128, 2)},
          "bench": {"bsa_fwd_sm90": (2, 16, 4096, 128, 8)}}
BLOCK = 128
INTERFACE = "cudnn.block_sparse_attention._interface"
QKO, VI, LSE = (2, 3, 1, 0), (3, 2, 1, 0), (2, 1, 0)  # cuDNN's permutes


def cases(size: str) -> list[Case]:
    """The block-sparse forward case at `size` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["bsa_fwd_sm90"])]


@functools.lru_cache(maxsize=None)
def _calls(d: int, count: int, b: int, h: int, s: int):
    import jax
    import jax.numpy as jnp

    import cutecall
    import cutecall.torch
    from cutecall import TensorSpec
    from cutecall.attention.block_sparse_kernels import forward_kernel
    obj = forward_kernel(d, count)
    qko, vi, lse = TensorSpec(mode=QKO), TensorSpec(mode=VI), TensorSpec(mode=LSE)
    out = (jax.ShapeDtypeStruct((b, h, s, d), jnp.bfloat16),
           jax.ShapeDtypeStruct((b, h, s), jnp.float32))
    call = cutecall.cutlass_call(obj, output_shape_dtype=out,
                                 input_spec=(qko, qko, vi, vi, None, None),
                                 output_spec=(qko, lse))
    return call, cutecall.torch.kernel(obj, outputs=2)


def _indices(b, h, nq, count, xp, **kw):
    step = max(1, nq // count)
    i = xp.arange(nq, **kw)[:, None]
    j = xp.arange(count, **kw)[None, :]
    blocks = (i + j * step) % nq
    return xp.broadcast_to(blocks, (b, h, nq, count))


def case(b: int, h: int, s: int, d: int, count: int) -> Case:
    """Block-sparse attention of q, k, v (b, h, s, d) bf16, `count` kv
    blocks of 128 per q block."""
    nq, scale = s // BLOCK, d ** -0.5
    shape = (b, h, s, d)

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        q, k, v = (r.normal(shape, bf16()) for _ in range(3))
        idx = jnp.asarray(_indices(b, h, nq, count, jnp, dtype=jnp.int32)) if concrete \
            else r.randint((b, h, nq, count), jnp.int32, nq)
        return _calls(d, count, b, h, s)[0], (q, k, v, idx, idx, idx, scale, count)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        q, k, v = (r.normal(shape, torch.bfloat16) for _ in range(3))
        o = torch.full(shape, float("nan"), dtype=torch.bfloat16, device=r.device)
        lse = torch.full((b, h, s), float("nan"), dtype=torch.float32, device=r.device)
        idx = r.empty((b, h, nq, count), torch.int32) if r.meta else \
            _indices(b, h, nq, count, torch, dtype=torch.int32, device=r.device).contiguous()
        args = (q.permute(*QKO), k.permute(*QKO), v.permute(*VI), o.permute(*QKO),
                lse.permute(*LSE), idx.permute(*VI), idx, idx, scale, count)
        return _calls(d, count, b, h, s)[1], args

    def jax_ref(q, k, v, idx, counts, sizes, sc, n):
        import jax
        import jax.numpy as jnp
        mask = _block_mask(idx, s, jnp)
        logits = jnp.einsum("bhqd,bhkd->bhqk", q.astype(jnp.float32),
                            k.astype(jnp.float32)) * sc
        logits = jnp.where(mask, logits, -jnp.inf)
        lse = jax.nn.logsumexp(logits, axis=-1)
        o = jnp.einsum("bhqk,bhkd->bhqd", jnp.exp(logits - lse[..., None]),
                       v.astype(jnp.float32))
        return o.astype(q.dtype), lse

    def torch_ref(q_t, k_t, v_t, o_t, lse_t, idx_t, counts, sizes, sc, n):
        import torch
        q, k, v = q_t.permute(3, 2, 0, 1), k_t.permute(3, 2, 0, 1), v_t.permute(*VI)
        mask = _block_mask(counts, s, torch)
        logits = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) * sc
        logits = logits.masked_fill(~mask, float("-inf"))
        lse = torch.logsumexp(logits, dim=-1)
        o = torch.einsum("bhqk,bhkd->bhqd", torch.exp(logits - lse[..., None]), v.float())
        return o.permute(*QKO), lse.permute(*LSE)

    def authors_torch(*args):
        # cuDNN's compiled kernel (its TVM-FFI build, its compile cache),
        # launched as _bsa_attn_fwd_sm90_blk128 launches it, writing into
        # our o and lse.
        import cuda.bindings.driver as cuda
        import torch
        compiled = _authors_compiled(b, h, s, d, count)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        compiled(*(t.detach() for t in args[:8]), args[8], args[9], stream)

    return Case(f"cudnn.bsa_fwd_sm90[bf16 {b}x{h}x{s}x{d} {count}/{nq} blocks]", jax_case,
                jax_ref, torch_case, (3, 4), torch_ref, authors_torch, None,
                atol=2e-2, rtol=2e-2)


def _block_mask(idx, s, xp):
    """(b, h, s, s) bool: query token i sees key token j when j's block is
    among i's block's indices."""
    b, h, nq, count = idx.shape
    blocks = xp.arange(nq)
    if xp.__name__ == "torch":
        blocks = blocks.to(idx.device)
    seen = (idx[..., None] == blocks).any(-2)                    # (b, h, nq, nq)
    seen = xp.repeat(xp.repeat(seen, BLOCK, -1), BLOCK, -2) if xp.__name__ != "torch" \
        else seen.repeat_interleave(BLOCK, -1).repeat_interleave(BLOCK, -2)
    return seen[..., :s, :s]


@functools.lru_cache(maxsize=None)
def _authors_compiled(b, h, s, d, count):
    """cuDNN's own compile for these shapes: one call of its launcher (on
    scratch tensors) fills its compile cache, whose entry is returned."""
    import importlib

    import torch
    interface = importlib.import_module(INTERFACE)
    fwd = interface._bsa_attn_fwd_sm90_blk128
    q = torch.zeros((b, h, s, d), dtype=torch.bfloat16, device="cuda")
    idx = _indices(b, h, s // BLOCK, count, torch, dtype=torch.int32, device="cuda").contiguous()
    before = set(fwd.compile_cache)
    fwd(q, q, q, idx, count)
    torch.cuda.synchronize()
    new = [key for key in fwd.compile_cache if key not in before]
    return fwd.compile_cache[(new or list(fwd.compile_cache))[-1]]


def jax_args_from_torch(args):
    """The JAX call's BHSD arguments holding the torch call's inputs."""
    import jax.numpy as jnp
    q_t, k_t, v_t, _o, _lse, _idx_t, idx, _sizes, sc, n = args

    def copy(t):
        return jnp.from_dlpack(t.detach().clone().contiguous())
    q, k, v = q_t.permute(3, 2, 0, 1), k_t.permute(3, 2, 0, 1), v_t.permute(*VI)
    i = copy(idx)
    return (copy(q), copy(k), copy(v), i, i, i, sc, n)


def as_jax_layout(outputs):
    """The torch call's outputs (cuDNN's views: o (s, d, h, b), lse (s, h,
    b)) as the JAX call returns them: o (b, h, s, d), lse (b, h, s)."""
    o_t, lse_t = outputs
    return [o_t.permute(3, 2, 0, 1), lse_t.permute(*LSE)]


def backward_args(b, h, s, d, count, device, bucket: int = 256):
    """The backward's call, for the kernel object
    ``cutecall.attention.block_sparse_kernels.backward_kernel(d, groups)``, as
    ``_bsa_attn_bwd_sm90_blk128`` makes it:
    ``((sq, sk, d, (h, b)), do, o, q, k, v, lse, dq, dk, dv, offsets,
    edges, None, workspace, scale)``, BHSD tensors (the kernel views them
    itself). On a device the CSR and the workspace come from cuDNN's own
    helpers (``build_bucketed_k2q_csr_cutedsl``,
    ``_empty_bwd_workspace_with_zeroed_accum``); on "meta", tensors of
    their shapes. Returns (args, groups)."""
    import importlib

    import torch
    nq = s // BLOCK
    groups = (nq + bucket - 1) // bucket
    r = TorchRandom(device, 0)
    q, k, v, do = (r.normal((b, h, s, d), torch.bfloat16) for _ in range(4))
    o = r.normal((b, h, s, d), torch.bfloat16)
    lse = r.normal((b, h, s), torch.float32)
    dq, dk, dv = (torch.full((b, h, s, d), float("nan"), dtype=torch.bfloat16,
                             device=r.device) for _ in range(3))
    if r.meta:
        offsets = r.empty((b, h, groups, nq + 1), torch.int32)
        edges = r.empty((b, h, nq * count), torch.int32)
        from cutecall.attention.block_sparse_kernels import workspace_size
        workspace = r.empty((b, h, workspace_size(s, s, d)), torch.float32)
    else:
        csr = importlib.import_module("cudnn.block_sparse_attention.csrc.bwd.bucketed_k2q_csr")
        interface = importlib.import_module(INTERFACE)
        idx = _indices(b, h, nq, count, torch, dtype=torch.int32, device=r.device).contiguous()
        offsets, edges, _, _ = csr.build_bucketed_k2q_csr_cutedsl(idx, count, nq,
                                                                  bucket_size_blocks=bucket)
        workspace = interface._empty_bwd_workspace_with_zeroed_accum(
            batch_size=b, num_heads=h, seqlen_q=s, seqlen_k=s, head_dim=d, round_q_to=128,
            round_k_to=128, round_d_to=32, zero_dq_accum=False, device=r.device,
            zero_kv_accum=offsets.shape[2] != 1)
    return ((s, s, d, (h, b)), do, o, q, k, v, lse, dq, dk, dv, offsets, edges, None,
            workspace, d ** -0.5), groups
