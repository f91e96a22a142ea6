"""QuACK's all-gather GEMM kernel (``corpus.quack_allgather_corpus``) on one
GPU: every shard already arrived (``flags >= epoch``), so the kernel runs
QuACK's all-gather schedule and flag gate without a transport; both fronts
against QuACK's ``gemm(..., ag_args=...)`` on the same inputs, bit for bit
(no split-K: each tile accumulated by one CTA). The multi-GPU transport is
QuACK's runner's (symmetric memory), not cutecall's."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("quack.distributed")

from authors_checks import check_against_authors  # noqa: E402
from corpus import quack_allgather_corpus as ag  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.mark.parametrize("shards", [1, 2])
def test_allgather_gemm_matches_quack_bit_for_bit(shards):
    m, n, k, _ = ag.SHAPES["test"]["gemm_allgather"]
    check_against_authors(ag.case(m, n, k, shards), ag.jax_args_from_torch)
