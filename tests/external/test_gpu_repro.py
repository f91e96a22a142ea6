"""The repro corpus (``corpus.repro_corpus``: our SIMT layernorm and f16 gate
in their authors' style, QuACK's TopK and 640-wide Hadamard) on a GPU: each
case through cutecall's torch and JAX fronts, default specs and every extent
static, against its reference and, bit for bit, against the authors' own
compile and launch on the same inputs (``bench/external`` times them: its
part ``losses``)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("quack.topk")

from authors_checks import check_against_authors  # noqa: E402
from corpus import repro_corpus  # noqa: E402
from corpus_checks import assert_same  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore::cutecall.StaticFallbackWarning"),
              pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")]
REPROS = {r.case.name.split("[")[0]: r for r in repro_corpus.repros("test")}


# The Hadamard case's float32 reference (the corpus's Sylvester transform)
# takes powers of two only; at 640 wide the static forms' check compares the
# fronts with each other.
@pytest.mark.parametrize("name", sorted(n for n in REPROS if n != "repro.hadamard640"))
def test_both_fronts_match_the_authors_bit_for_bit(name):
    r = REPROS[name]
    check_against_authors(r.case, r.jax_args_from_torch)


@pytest.mark.parametrize("name", sorted(REPROS))
def test_the_static_forms_compute_the_same(name):
    r = REPROS[name]
    k, args = r.case.torch("cuda", 0)
    k(*args)
    ks, sargs = r.torch_static("cuda", 0)
    ks(*sargs)
    for i in r.case.torch_outputs:
        assert_same(sargs[i], args[i], r.case, "torch static vs default")
    call, _ = r.jax_static(False, 0)
    jargs = r.jax_args_from_torch(args)
    import jax
    for got, i in zip(jax.tree.leaves(call(*jargs)), r.case.torch_outputs):
        assert_same(got, args[i], r.case, "JAX static vs torch")
