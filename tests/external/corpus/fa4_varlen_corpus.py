"""FlashAttention-4's varlen scheduling helpers (``flash_attn.cute.
cu_blocks_kernel``), called the way FA4 calls them
(``flash_attn/cute/interface.py``)::

    _compute_tile_cumsum(cu_seqlens=cu, tile_size=128)
      cute.compile(CuSeqlensToBlocksKernel(tile=128, seqlen_q_multiplier=1),
                   cu_total_m_blocks, None, cu_seqlens, None, None, None,
                   make_fake_stream(use_tvm_ffi_env_stream=True),
                   options="--enable-tvm-ffi")
      compiled(cu_total_m_blocks, None, cu_seqlens, None, None, None)

    _compute_blocks_to_batch(cu_total_blocks, num_blocks, device)
      compiled = cute.compile(CuBlocksToBatchKernel(), cu_total_blocks,
                              blocks_to_batch, ...)
      compiled(cu_total_blocks, blocks_to_batch)

The tile cumsum writes its *first* parameter (``mCuBlocks``); the inverse
writes its last. The cases hand FA4's kernel objects to cutecall unchanged,
with no output names::

    call(None, cu_seqlens, None, None, None)              # JAX: cu_blocks
    kernel(cu_blocks, None, cu_seqlens, None, None, None)  # torch
    call(cu_blocks)  /  kernel(cu_blocks, blocks_to_batch)

Shapes: ``"test"`` 7 sequences (``"bench"`` 63) of lengths drawn in
[1, 4096); 128-token tiles.
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import mod, sds

__all__ = ["KERNELS", "SHAPES", "cases", "tile_cumsum_case", "blocks_to_batch_case",
           "lengths"]

KERNELS = ("tile_cumsum", "blocks_to_batch")
SHAPES = {"test": 7, "bench": 63}
TILE = 128
MODULE = "flash_attn.cute.cu_blocks_kernel"
INTERFACE = "flash_attn.cute.interface"


def cases(size: str) -> list[Case]:
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [tile_cumsum_case(SHAPES[size]), blocks_to_batch_case(SHAPES[size])]


def lengths(batch: int) -> list[int]:
    """Deterministic sequence lengths in [1, 4096)."""
    return [1 + (i * 2654435761) % 4095 for i in range(1, batch + 1)]


def _cumulative(values) -> list[int]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


def _blocks(batch: int) -> list[int]:
    return _cumulative(-(-n // TILE) for n in lengths(batch))


@functools.lru_cache(maxsize=None)
def _calls(kind: str):
    import cutecall
    import cutecall.torch
    if kind == "tile_cumsum":
        obj = mod(MODULE).CuSeqlensToBlocksKernel(tile=TILE, seqlen_q_multiplier=1)
        return (cutecall.cutlass_call(obj, output_shape_dtype=lambda splits, cu, *rest: sds(
            cu.shape, cu.dtype)), cutecall.torch.kernel(obj))
    obj = mod(MODULE).CuBlocksToBatchKernel()
    return (cutecall.cutlass_call(obj, output_shape_dtype=lambda cu: sds(
        (_num_blocks(cu.shape[0] - 1),), cu.dtype)), cutecall.torch.kernel(obj))


def _num_blocks(batch: int) -> int:
    """blocks_to_batch's length: every block plus one past the end (mapped
    to ``batch``, invalid)."""
    return _blocks(batch)[-1] + 1


def _array(values, concrete: bool, jax_side: bool, device="cpu"):
    if jax_side:
        import jax.numpy as jnp
        return jnp.asarray(values, jnp.int32) if concrete else sds((len(values),), jnp.int32)
    import torch
    if device == "meta":
        return torch.empty(len(values), dtype=torch.int32, device="meta")
    return torch.tensor(values, dtype=torch.int32, device=device)


def _empty(n: int, device):
    import torch
    return torch.full((n,), -1, dtype=torch.int32, device=device)


def _authors(fn_name: str, key, *args):
    """FA4's compiled helper for `key`: one call of its launcher fills its
    compile cache (FA4's TVM-FFI build), whose entry is returned."""
    fn = getattr(mod(INTERFACE), fn_name)
    if key not in fn.compile_cache:
        fn(*args[0], **args[1])
    return fn.compile_cache[key]


def tile_cumsum_case(batch: int) -> Case:
    """cu_blocks (batch + 1,) = cumulative ceil(len / 128) of cu_seqlens."""
    cu = _cumulative(lengths(batch))

    def jax_case(concrete, seed):
        return _calls("tile_cumsum")[0], (None, _array(cu, concrete, True), None, None, None)

    def torch_case(device, seed):
        return _calls("tile_cumsum")[1], (_empty(batch + 1, device), None,
                                          _array(cu, True, False, device), None, None, None)

    def jax_ref(splits, cu_seqlens, *rest):
        import jax.numpy as jnp
        return jnp.asarray(_blocks(batch), jnp.int32)

    def torch_ref(out, splits, cu_seqlens, *rest):
        import torch
        return (torch.tensor(_blocks(batch), dtype=torch.int32),)

    def authors_torch(out, splits, cu_seqlens, seqused, num_splits, virtual):
        compiled = _authors("_compute_tile_cumsum", (TILE, 1, True, False, False, False),
                            (), dict(cu_seqlens=cu_seqlens, tile_size=TILE))
        compiled(out, None, cu_seqlens, None, None, None)

    return Case(f"fa4.tile_cumsum[{batch} seqs]", jax_case, jax_ref, torch_case, (0,),
                torch_ref, authors_torch, None, atol=0, rtol=0)


def blocks_to_batch_case(batch: int) -> Case:
    """blocks_to_batch (num_blocks,) = the sequence each 128-token block is in."""
    blocks = _blocks(batch)
    n = _num_blocks(batch)
    want = [next(b for b in range(batch) if blocks[b] <= j < blocks[b + 1])
            if j < blocks[-1] else batch for j in range(n)]

    def jax_case(concrete, seed):
        return _calls("blocks_to_batch")[0], (_array(blocks, concrete, True),)

    def torch_case(device, seed):
        return _calls("blocks_to_batch")[1], (_array(blocks, True, False, device),
                                              _empty(n, device))

    def jax_ref(cu_blocks):
        import jax.numpy as jnp
        return jnp.asarray(want, jnp.int32)

    def torch_ref(cu_blocks, out):
        import torch
        return (torch.tensor(want, dtype=torch.int32),)

    def authors_torch(cu_blocks, out):
        compiled = _authors("_compute_blocks_to_batch", (), (cu_blocks, n, cu_blocks.device), {})
        compiled(cu_blocks, out)

    return Case(f"fa4.blocks_to_batch[{batch} seqs]", jax_case, jax_ref, torch_case, (1,),
                torch_ref, authors_torch, None, atol=0, rtol=0)


def jax_args_from_torch(args):
    """The JAX call's arguments holding the torch call's inputs."""
    import jax.numpy as jnp

    def copy(t):
        return None if t is None else jnp.from_dlpack(t.detach().clone().contiguous())
    if len(args) == 2:  # blocks_to_batch: (cu_blocks, out)
        return (copy(args[0]),)
    return (None, copy(args[2]), None, None, None)
