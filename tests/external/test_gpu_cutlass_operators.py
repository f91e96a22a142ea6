"""NVIDIA's CUTLASS Operator API Hopper GEMM
(``corpus.cutlass_operators_corpus``) on a GPU: the operator's kernel
object through cutecall's torch and JAX fronts (eager and in ``jax.jit``),
with no output names, against a float32 matmul and, bit for bit, against
``op.run(GemmArguments(...))`` on the same inputs (deterministic: no split-K,
each output tile accumulated by one CTA in a fixed order)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass.operators")

from authors_checks import check_against_authors  # noqa: E402
from corpus import cutlass_operators_corpus as operators  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
M, N, K = operators.SHAPES["test"]["gemm_sm90"]


@pytest.mark.parametrize("m", [M, M + 1024 + 7])
def test_gemm_matches_the_operator_bit_for_bit(m):
    check_against_authors(operators.case(m, N, K), operators.jax_args_from_torch)
