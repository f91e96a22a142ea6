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


def test_bsa_backward_torch_matches_cudnn():
    # cuDNN's sm90 backward kernel object through cutecall's torch front
    # (outputs found: dQ, dK, dV, workspace), its CSR and workspace made by
    # cuDNN's helpers, against cuDNN's _bsa_attn_bwd_sm90_blk128 on the same
    # inputs. dQ accumulates in float32 across key blocks (atomics): equal
    # within bf16 rounding, not bit for bit.
    import importlib

    import cutecall.torch
    from corpus_checks import assert_close
    b, h, s, d, count = bsa.SHAPES["test"]["bsa_fwd_sm90"]
    args, groups = bsa.backward_args(b, h, s, d, count, "cuda")
    k = cutecall.torch.kernel(bsa.backward_kernel(d, groups), outputs=4)
    k(*args)
    assert k.output_params == ["mdQ", "mdK", "mdV", "workspace"]
    _, do, o, q, kk, v, lse = args[:7]
    interface = importlib.import_module(bsa.INTERFACE)
    idx = bsa._indices(b, h, s // bsa.BLOCK, count, torch, dtype=torch.int32,
                       device="cuda").contiguous()
    want = interface._bsa_attn_bwd_sm90_blk128(do, q, kk, v, o, lse, idx, count)
    case = bsa.cases("test")[0]
    for got, w, name in zip(args[7:10], want, ("dQ", "dK", "dV")):
        assert torch.isfinite(got).all(), name
        assert_close(got, w, case, f"backward {name} vs cuDNN")
