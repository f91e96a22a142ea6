"""Liger-Kernel's CuTe DSL ops (``corpus.liger_corpus``) on a GPU: outputs
through cutecall's JAX front (eager and in ``jax.jit``) and torch front,
with no output names, against float32 references and, bit for bit,
against Liger's own TVM-FFI build of the same kernel object on the same
inputs (both kernels are elementwise: each element written by one thread,
deterministic). Torch outputs start NaN-filled, so a missed element shows.
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("liger_kernel.ops.backends._cutedsl.jsd")

import cutecall  # noqa: E402
from corpus import liger_corpus as liger  # noqa: E402
from authors_checks import check_against_authors  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore::cutecall.StaticFallbackWarning")]

TEST = liger.SHAPES["test"]


def _cases():
    return [liger.jsd_case(*TEST["jsd"], labels=True),
            liger.jsd_case(*TEST["jsd"], labels=False),
            liger.swiglu_case(*TEST["swiglu_fwd"])]


@pytest.mark.parametrize("which", ["jsd_labels", "jsd", "swiglu"])
def test_liger_matches_liger_bit_for_bit(which, x64):
    case = dict(zip(["jsd_labels", "jsd", "swiglu"], _cases()))[which]
    check_against_authors(case, liger.jax_args_from_torch)


def test_liger_labels_zero_ignored_rows(x64):
    case = _cases()[0]
    k, args = case.torch("cuda", 0)
    k(*args)
    ignored = args[4] == liger.IGNORE_INDEX
    assert bool(ignored.any())
    assert bool((args[2][ignored] == 0).all()) and bool((args[3][ignored] == 0).all())
    assert k.output_params == ["mLoss", "mDX"]


def test_a_new_scale_compiles_nothing(x64):
    import cutlass
    case = _cases()[0]
    k, args = case.torch("cuda", 0)
    k(*args)
    before = cutecall.compile_stats()["compiles"]
    args = args[:5] + (cutlass.Float32(0.125),) + args[6:]
    k(*args)
    assert cutecall.compile_stats()["compiles"] == before
