"""FA4's block sparsity through cutecall.attention on a GPU (H100; on a
B200 the q blocks are 256 rows, FA4's sm100 prefill): outputs, LSE and the
gradients of q, k, v against the float32 reference with the equivalent
dense mask (``attention_checks.check``).

The mask: causal (the ``mask_mod``) within a band of blocks -- a kv block
is kept when it starts at most 384 keys before the query block -- so the
block lists, not the mask_mod, drop the blocks outside the band; blocks
wholly visible are "full" (no mask_mod), the rest "mask" blocks. The
backward gets the transposed lists (``block_sparse_tensors_bwd``). Sequence
length 600: the last blocks are ragged."""

import pytest

pytest.importorskip("flash_attn.cute")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import cutecall  # noqa: E402
from attention_checks import bf16, check, normal  # noqa: E402
from cutecall.attention import BlockSparseTensors  # noqa: E402
from cutecall.attention import reference as R  # noqa: E402

pytestmark = pytest.mark.gpu

KB, BAND = 128, 384


def _q_block() -> int:
    return 256 if cutecall.current_target().arch.startswith("sm_10") else 128


def _allowed(i, j, qb):
    return i * qb - j * KB <= BAND


def _lists(keep):
    """(cnt, idx) per row of a (rows, cols) block matrix, indices packed left."""
    rows, cols = keep.shape
    cnt = keep.sum(1).astype(np.int32)
    idx = np.zeros((rows, cols), np.int32)
    for r in range(rows):
        found = np.nonzero(keep[r])[0]
        idx[r, :len(found)] = found
    return cnt, idx


def block_tensors(s: int, qb: int, with_full: bool, lead=(1, 1)):
    """(forward, backward) BlockSparseTensors of the banded causal mask."""
    m, n = -(-s // qb), -(-s // KB)
    qi, kj = np.arange(m * qb)[:, None], np.arange(n * KB)[None, :]
    visible = (qi >= kj) & (qi < s) & (kj < s)
    blocks = visible.reshape(m, qb, n, KB)
    allowed = _allowed(np.arange(m)[:, None], np.arange(n)[None, :], qb)
    some, every = blocks.any((1, 3)) & allowed, blocks.all((1, 3)) & allowed
    full = every if with_full else np.zeros_like(every)
    partial = some & ~full

    def tensors(part, whole, size):
        arrays = [*_lists(part), *(_lists(whole) if with_full else (None, None))]
        return BlockSparseTensors(*(None if a is None else jnp.asarray(
            np.broadcast_to(a, lead + a.shape)) for a in arrays), block_size=size)
    return tensors(partial, full, (qb, KB)), tensors(partial.T, full.T, (qb, KB))


def _reference_mask(qb):
    return lambda b, h, qi, kj: (qi >= kj) & _allowed(qi // qb, kj // KB, qb)


@pytest.mark.parametrize("heads, heads_kv, with_full, lead", [
    (4, 4, True, (1, 1)),    # MHA, full and mask blocks, broadcast over batch and heads
    (4, 2, False, (2, 1)),   # GQA (PackGQA kept: heads broadcast), mask blocks only
    (4, 2, True, (2, 4)),    # GQA with per-head lists: FA4 drops PackGQA
])
def test_block_sparse_matches_reference(heads, heads_kv, with_full, lead):
    s, qb = 600, _q_block()
    q = normal(0, (2, s, heads, 128), bf16)
    k, v = normal(1, (2, s, heads_kv, 128), bf16), normal(2, (2, s, heads_kv, 128), bf16)
    fwd, bwd = block_tensors(s, qb, with_full, lead)
    check(q, k, v, mask_mod=R.prefix_lm_mask_mod(0), block_sparse_tensors=fwd,
          block_sparse_tensors_bwd=bwd, ref_kw=dict(mask_mod=_reference_mask(qb)))
