"""QuACK's Hadamard transform (``corpus.quack_hadamard_corpus``) on a GPU:
cutecall's torch and JAX fronts (eager and in ``jax.jit``), with no output
names, against the float32 Sylvester transform and, bit for bit, against
QuACK's own ``_hadamard_transform_fwd`` on the same inputs (deterministic:
each row transformed by one CTA in a fixed order); a new scale or row count
compiles nothing."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("quack.transform.hadamard")

import cutecall  # noqa: E402
from authors_checks import check_against_authors  # noqa: E402
from corpus import quack_hadamard_corpus as hadamard  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore::cutecall.StaticFallbackWarning"),
              pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")]
ROWS, N = hadamard.SHAPES["test"]["hadamard"]


def test_hadamard_matches_quack_bit_for_bit():
    check_against_authors(hadamard.cases("test")[0], hadamard.jax_args_from_torch)


def test_hadamard_other_scale_and_rows_compile_nothing():
    k, args = hadamard.cases("test")[0].torch("cuda", 0)
    k(*args)
    before = cutecall.compile_stats()["compiles"]
    case = hadamard.case(ROWS + 1024, N, scale=0.5)
    check_against_authors(case, hadamard.jax_args_from_torch)
    k2, args2 = case.torch("cuda", 1)
    assert k2 is k
    k(*args2)
    assert cutecall.compile_stats()["compiles"] == before
