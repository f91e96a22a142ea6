"""FA4's block-sparsity kernel (``corpus.fa4_block_sparsity_corpus``) on a
GPU: the four tensors through cutecall's torch front and JAX front (in
``jax.jit``) against the expected causal layout and, bit for bit, against
FA4's own ``compute_block_sparsity`` build of the same kernel on the same
zero-filled tensors (integer counts and indices, one thread writes each)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flash_attn.cute.compute_block_sparsity")

import jax  # noqa: E402

from corpus import fa4_block_sparsity_corpus as bs  # noqa: E402
from corpus_checks import as_numpy  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_block_sparsity_matches_fa4_bit_for_bit():
    case = bs.case(*bs.SHAPES["test"]["block_sparsity"])
    k, args = case.torch("cuda", 0)
    k(*args)
    ours = [as_numpy(t) for t in args[0][:4]]
    _, theirs_args = case.torch("cuda", 0)
    case.authors_torch(*theirs_args)
    torch.cuda.synchronize()
    theirs = [as_numpy(t) for t in theirs_args[0][:4]]
    want = [as_numpy(t) for t in case.torch_reference(*args)]
    call, _ = case.jax(False, 0)
    jargs = bs.jax_args_from_torch(args)
    blocks = jargs[0]
    jitted = jax.jit(lambda b: call(b, *jargs[1:]))(blocks)
    for name, o, t, w, j in zip(bs.FIELDS, ours, theirs, want, jax.tree.leaves(jitted)):
        np.testing.assert_array_equal(t, w, err_msg=f"FA4 vs expected: {name}")
        np.testing.assert_array_equal(o, t, err_msg=f"torch vs FA4: {name}")
        np.testing.assert_array_equal(as_numpy(j), t, err_msg=f"JAX vs FA4: {name}")
