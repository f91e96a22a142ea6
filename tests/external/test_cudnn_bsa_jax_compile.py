"""``cutecall.attention.block_sparse_attention`` (cuDNN frontend's sm90
block-sparse attention, differentiable in JAX) compiles for sm_90a on a
machine without a GPU.

What a user relies on: the forward is one custom call, ``jax.grad`` adds
cuDNN's CSR builder and backward (three in all, bound where cuDNN's kernels
write: o and lse between the inputs, the CSR's outputs before its inputs,
dQ/dK/dV before the CSR); each kernel compiles once for every shape (two
sequence lengths and batch sizes: still three compiles); several query
buckets alias a zeroed workspace; bad arguments fail before any compile,
naming the argument and value.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("cudnn.block_sparse_attention.csrc.fwd.sm90_blk128.bsa_fwd_sm90")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import block_sparse_attention  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"
FWD = "q,k,v,indices,counts,sizes,o,lse"
CSR = ("mCounts,mQ2kBlockIndex,mQ2kBlockNums,mLocalOffsets,mGroupTotals,"
       "mBucketedK2qOffsets,mCursors,mBucketedK2qIndices")
BWD = "mdO,mO,mQ,mK,mV,mLSE,bucketed_k2q_offsets,bucketed_k2q_indices"


def _structs(b, h, s, count, layout="bhsd", dtype=jnp.bfloat16):
    shape = (b, h, s, 128) if layout == "bhsd" else (b, s, h, 128)
    x = jax.ShapeDtypeStruct(shape, dtype)
    return x, x, x, jax.ShapeDtypeStruct((b, h, s // 128, count), jnp.int32)


def _lowered(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def _operands(text: str) -> list[str]:
    return re.findall(r'operands = "([^"]*)"', text)


def _grad(count, **kw):
    def loss(q, k, v, idx):
        return block_sparse_attention(q, k, v, idx, count, **kw).astype(jnp.float32).sum()
    return jax.grad(loss, argnums=(0, 1, 2))


def test_forward_and_grad_compile_each_kernel_once_for_every_shape(compiles):
    text = _lowered(lambda q, k, v, i: block_sparse_attention(q, k, v, i, 2),
                    *_structs(1, 2, 512, 2))
    assert text.count(CUSTOM_CALL) == 1 and _operands(text) == [FWD]
    assert compiles() == 1
    text = _lowered(_grad(2), *_structs(1, 2, 512, 2))
    assert _operands(text) == [FWD, CSR, BWD + ",mdQ,mdK,mdV,workspace"]
    assert "output_operand_aliases" in text  # the CSR's zeroed edge counts
    assert compiles() == 3
    # Another batch, sequence length and scale: the same three kernels.
    _lowered(lambda q, k, v, i: block_sparse_attention(q, k, v, i, 2, scale=0.3),
             *_structs(2, 2, 1024, 2))
    _lowered(_grad(2, scale=0.3), *_structs(2, 2, 1024, 2))
    assert compiles() == 3


def test_several_buckets_alias_a_zeroed_workspace(compiles):
    # 8 query blocks in buckets of 2: dK/dV accumulate in the workspace,
    # which arrives zeroed and aliased to the 4th output.
    text = _lowered(_grad(2, bucket_size_blocks=2), *_structs(1, 2, 1024, 2))
    assert _operands(text)[2] == BWD + ",workspace,mdQ,mdK,mdV"
    assert "output_tuple_indices = [3]" in text
    assert compiles() == 3  # the forward, the CSR for buckets of 2, the accumulating backward


def test_bshd_layout_lowers_forward_and_grad(compiles):
    args = _structs(1, 2, 512, 2, layout="bshd", dtype=jnp.float16)
    out = jax.eval_shape(lambda *a: block_sparse_attention(*a, 2, layout="bshd"), *args)
    assert out.shape == (1, 512, 2, 128) and out.dtype == jnp.float16
    text = _lowered(_grad(2, layout="bshd"), *args)
    assert text.count(CUSTOM_CALL) == 3
    assert compiles() == 3


Q = jax.ShapeDtypeStruct((1, 2, 512, 128), jnp.bfloat16)
IDX = jax.ShapeDtypeStruct((1, 2, 4, 2), jnp.int32)


@pytest.mark.parametrize("args, kwargs, match", [
    ((Q.update(dtype=jnp.float32), Q, Q, IDX), {}, r"q must be bfloat16 or float16, got float32"),
    ((Q, Q.update(dtype=jnp.float16), Q, IDX), {}, r"k must have q's dtype bfloat16, got float16"),
    ((Q.update(shape=(1, 2, 512, 64)),) * 3 + (IDX,), {}, r"head dim must be 128.*64\)"),
    ((Q, Q, Q.update(shape=(1, 2, 256, 128)), IDX), {}, r"v must have shape \(1, 2, 512, 128\)"),
    ((Q.update(shape=(1, 2, 200, 128)),) * 3 + (IDX,), {}, r"q's sequence length.*got 200"),
    ((Q, Q, Q, IDX.update(dtype=jnp.int16)), {}, r"indices must be int32, got int16"),
    ((Q, Q, Q, IDX.update(shape=(1, 2, 3, 2))), {}, r"indices must have shape .*\(1, 2, 3, 2\)"),
    ((Q, Q, Q, IDX.update(shape=(1, 2, 4, 5))), {}, r"0 < C <= 4, got \(1, 2, 4, 5\)"),
    ((Q, Q, Q, IDX), {"count": 3}, r"count must be a Python int in \[1, 2\].*got 3"),
    ((Q, Q, Q, IDX), {"count": 0}, r"count .* got 0"),
    ((Q, Q, Q, IDX), {"scale": -1.0}, r"scale must be a finite positive .*got -1.0"),
    ((Q, Q, Q, IDX), {"layout": "sbhd"}, r"layout must be one of .*got 'sbhd'"),
    ((Q, Q, Q, IDX), {"bucket_size_blocks": 0}, r"bucket_size_blocks must be .*got 0"),
    ((Q.update(shape=(1, 2, 512)),) * 3 + (IDX,), {}, r"q must be rank 4, got shape \(1, 2, 512\)"),
    ((Q, Q, Q, IDX), {"sparse_block_size": 64}, r"sparse_block_size must be 128 .*got 64"),
], ids=["dtype", "k_dtype", "head_dim", "v_shape", "seqlen", "idx_dtype", "idx_blocks",
        "idx_capacity", "count_high", "count_zero", "scale", "layout", "bucket", "rank",
        "block_size"])
def test_bad_arguments_name_argument_and_value(args, kwargs, match, compiles):
    with pytest.raises((TypeError, ValueError), match=match):
        jax.eval_shape(lambda *a: block_sparse_attention(*a, **kwargs), *args)
    assert compiles() == 0


def test_importing_it_imports_no_jax_dsl_or_cudnn():
    code = ("import sys; from cutecall.attention import block_sparse_attention; "
            "print([m for m in ('jax', 'cutlass', 'cudnn', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
