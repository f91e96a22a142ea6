"""Runtime scalars in the torch front, launched (issue 37 §1): QuACK's GEMM
with its epilogue and its symmetric GEMM, with the authors' own
``Float32``/``Int32`` objects, launch one kernel for alpha 2 then 3 (one
compile, one C++ entry), each output as the reference says."""

import pytest

pytest.importorskip("quack")
torch = pytest.importorskip("torch")

from corpus import quack_gemm_corpus as corpus  # noqa: E402
from corpus_checks import assert_close  # noqa: E402
from test_quack_runtime_scalars import NAMES, authors_args  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", NAMES)
def test_a_new_alpha_launches_the_same_kernel(name, compiles):
    case = corpus.case(name, *corpus.SHAPES["test"][name])
    seen = None  # (compiles, C++ entries) after the first launch
    for alpha in (2.0, 3.0):
        kernel, args = authors_args(name, alpha, "cuda")
        plain = list(args)
        plain[4] = args[4]._replace(**{f: getattr(args[4], f).value
                                       for f in ("alpha", "beta")
                                       if getattr(args[4], f, None) is not None})
        want = case.torch_reference(*plain)
        want = want[0] if isinstance(want, (tuple, list)) else want
        want = want["mAuxOut"] if isinstance(want, dict) else want
        kernel(*args)
        torch.cuda.synchronize()
        assert_close(args[2], want, case, f"torch, alpha Float32({alpha})")
        if seen is None:
            seen = (compiles(), len(kernel.launch))
    assert (compiles(), len(kernel.launch)) == seen  # no compile, no new entry
