"""FlashAttention-4's block-sparsity kernel (``flash_attn.cute.
compute_block_sparsity.BlockSparsityKernel``), called the way FA4 calls it.

FA4's path (``compute_block_sparsity(tile_m, tile_n, b, h, sq, sk,
mask_mod, ...)``, for FlexAttention's block-sparse forward)::

    kernel = BlockSparsityKernel(mask_mod, tile_mn=(tile_m, tile_n),
                                 compute_full_blocks=True)
    compiled = cute.compile(kernel, to_cute_block_sparse_tensors(...),
                            seqlen_q, seqlen_k, None, None, None, None,
                            AuxData(None, None), options="--enable-tvm-ffi")
    compiled((mask_cnt, mask_idx, full_cnt, full_idx, None, None, None, None),
             seqlen_q, seqlen_k, None, None, None, None, AuxData(None, None))

The kernel writes into the zero-filled tensors of its first parameter,
annotated ``BlockSparseTensors`` (a NamedTuple) and passed as a plain
tuple: the counts, and the block indices up to each count (the rest stay
zero). No stream parameter (the launch takes cutecall's). The case hands
FA4's kernel object to cutecall unchanged::

    kernel((cnt, idx, fcnt, fidx, None, None, None, None), sq, sk,
           None, None, None, None, AuxData(None, None))   # torch: written
    call(<the same>)   # JAX: the four tensors, updated in place
                       # (input_output_aliases by field name)

torch names no output: the kernel's writes say which parameter it
updates. ``mask_mod`` is causal (``q_idx >= kv_idx``, ``fa4_masks``), a
CuTe DSL function as FA4's users write them.

Shapes (b, h, s), 128x128 tiles: ``"test"`` (1, 2, 512); ``"bench"`` (2,
16, 8192).
"""

from __future__ import annotations

import functools

from . import Case

__all__ = ["KERNELS", "SHAPES", "TILE", "cases", "case", "expected", "jax_args_from_torch"]

KERNELS = ("block_sparsity",)
SHAPES = {"test": {"block_sparsity": (1, 2, 512)},
          "bench": {"block_sparsity": (2, 16, 8192)}}
TILE = 128
MODULE = "flash_attn.cute.compute_block_sparsity"
FIELDS = ("mask_block_cnt", "mask_block_idx", "full_block_cnt", "full_block_idx")


def cases(size: str) -> list[Case]:
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["block_sparsity"])]


@functools.lru_cache(maxsize=None)
def _calls(b: int, h: int, s: int):
    import importlib

    import jax
    import jax.numpy as jnp

    import cutecall
    import cutecall.torch
    from .fa4_masks import causal_mask
    obj = importlib.import_module(MODULE).BlockSparsityKernel(
        causal_mask, tile_mn=(TILE, TILE), compute_full_blocks=True)
    n = s // TILE
    cnt, idx = (jax.ShapeDtypeStruct(x, jnp.int32) for x in ((b, h, n), (b, h, n, n)))
    aliases = {(0, f): i for i, f in enumerate(FIELDS)}
    return (cutecall.cutlass_call(obj, output_shape_dtype=(cnt, idx, cnt, idx),
                                  input_output_aliases=aliases),
            cutecall.torch.kernel(obj))


def expected(b: int, h: int, s: int, xp):
    """The four tensors for the causal mask, square tiles: m block i has
    one partial block (i) and i full ones (0..i-1), indices in order, the
    rest zero."""
    import numpy as np
    n = s // TILE
    cnt = np.ones((b, h, n), np.int32)
    idx = np.zeros((b, h, n, n), np.int32)
    idx[..., 0] = np.arange(n)
    fcnt = np.broadcast_to(np.arange(n, dtype=np.int32), (b, h, n)).copy()
    fidx = np.where(np.arange(n)[None, :] < np.arange(n)[:, None], np.arange(n)[None, :], 0)
    fidx = np.broadcast_to(fidx.astype(np.int32), (b, h, n, n)).copy()
    return tuple(xp(a) for a in (cnt, idx, fcnt, fidx))


def _aux():
    import importlib
    return importlib.import_module("flash_attn.cute.utils").AuxData(None, None)


def case(b: int, h: int, s: int) -> Case:
    """FA4's block sparsity of the causal mask for (b, h, s, s), 128 tiles."""
    n = s // TILE

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        blocks = tuple(jnp.zeros(x, jnp.int32) for x in ((b, h, n), (b, h, n, n)) * 2)
        return _calls(b, h, s)[0], (blocks + (None,) * 4, s, s, None, None, None, None, _aux())

    def torch_case(device, seed):
        import torch
        blocks = tuple(torch.zeros(x, dtype=torch.int32, device=device)
                       for x in ((b, h, n), (b, h, n, n)) * 2)
        return _calls(b, h, s)[1], (blocks + (None,) * 4, s, s, None, None, None, None,
                                    _aux())

    def jax_ref(blocks, *rest):
        import jax.numpy as jnp
        return expected(b, h, s, jnp.asarray)

    def torch_ref(blocks, *rest):
        import torch
        return expected(b, h, s, torch.from_numpy)

    def authors_torch(blocks, sq, sk, *rest):
        _authors_compiled(b, h, s)(blocks, sq, sk, None, None, None, None, _aux())

    return Case(f"fa4.block_sparsity[causal {b}x{h}x{s}]", jax_case, jax_ref, torch_case, (0,),
                torch_ref, authors_torch, None, atol=0, rtol=0)


@functools.lru_cache(maxsize=None)
def _authors_compiled(b: int, h: int, s: int):
    """FA4's own compile for the causal mask: one call of
    ``compute_block_sparsity`` fills its compile cache, whose new entry is
    returned."""
    import importlib

    from .fa4_masks import causal_mask
    fn = importlib.import_module(MODULE).compute_block_sparsity
    before = set(fn.compile_cache)
    fn(TILE, TILE, b, h, s, s, causal_mask, None, "cuda")
    new = [k for k in fn.compile_cache if k not in before]
    return fn.compile_cache[(new or list(fn.compile_cache))[-1]]


def jax_args_from_torch(args):
    """The JAX call's arguments for the torch call's: its tensors' shapes,
    zero-filled (what the kernel updates starts zero; the torch call's may
    have been written already), the rest as they are."""
    import jax.numpy as jnp
    blocks = tuple(None if t is None else jnp.zeros(tuple(t.shape), jnp.int32)
                   for t in args[0])
    return (blocks,) + tuple(args[1:])
