"""cuDNN frontend's Hopper block-sparse attention forward
(``corpus.cudnn_bsa_corpus``) on a GPU: cuDNN's kernel object through
cutecall's torch front (cuDNN's permuted views) and JAX front (BHSD arrays,
``TensorSpec(mode=...)``; eager and in ``jax.jit``), with no output names,
against a dense masked attention in float32 and, bit for bit, against
cuDNN's own compiled kernel on the same inputs (deterministic: one CTA per
query block, no split-KV). An sm90 GPU only (H100/H200)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cudnn.block_sparse_attention.csrc.fwd.sm90_blk128.bsa_fwd_sm90")

from authors_checks import check_against_authors  # noqa: E402
from corpus import cudnn_bsa_corpus as bsa  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(autouse=True)
def hopper():
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("cuDNN's sm90 block-sparse kernel runs on sm_90 only")


@pytest.mark.parametrize("shape", [bsa.SHAPES["test"]["bsa_fwd_sm90"], (2, 4, 1024, 128, 3)],
                         ids=["test", "batch2_count3"])
def test_bsa_forward_matches_cudnn_bit_for_bit(shape):
    check_against_authors(bsa.case(*shape), bsa.jax_args_from_torch,
                          as_jax_layout=bsa.as_jax_layout)
