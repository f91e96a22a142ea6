"""The launch object on a GPU: entries that carry static masks (the static
fallback's, ``static=``) are keyed by their compiled-in values in C++ --
registered without reading the call again, matched by later calls of the
same values, missed (and compiled from the remembered rung, without a
climb) by other values, and never cleared. Marked `gpu`."""

import warnings

import pytest

torch = pytest.importorskip("torch")

import cutecall
import cutecall.torch as ct
from cutecall.examples import specialization as sp

pytestmark = pytest.mark.gpu
DEV = "cuda"


@pytest.fixture(autouse=True)
def _needs_torch_cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


def row_sum(k, m, n):
    x = torch.randn(m, n, device=DEV)
    out = torch.empty(m, device=DEV)
    k(x, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x.sum(dim=1), rtol=1e-5, atol=1e-4)


def test_a_fallback_entry_is_keyed_by_its_static_extent(compiles):
    k = ct.kernel(sp.row_sum_unrolled, name="row_sum_unrolled_gpu_keys")
    with pytest.warns(cutecall.StaticFallbackWarning):
        row_sum(k, 1000, 16)  # N = 16 compiled in, M dynamic
    climbed = compiles()
    assert len(k.launch) == 1 and k.static_masks == [0b10, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", cutecall.StaticFallbackWarning)
        row_sum(k, 1008, 16)  # another M of the class: the same entry
        assert len(k.launch) == 1 and compiles() == climbed
        row_sum(k, 1000, 8)   # another N: a miss, compiled at the rung
        assert len(k.launch) == 2 and compiles() == climbed + 1
        row_sum(k, 1000, 16)  # the first entry still matches
        row_sum(k, 1000, 8)
    assert len(k.launch) == 2 and compiles() == climbed + 1


def test_static_true_entries_match_only_their_shape(compiles):
    k = ct.kernel(sp.tile_scale_load, static=True)
    for shape in [(4, 8), (4, 8), (8, 8), (4, 8)]:
        x = torch.randn(*shape, device=DEV)
        out = torch.empty_like(x)
        k(x, out)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2 * x)
    assert len(k.launch) == 2 and compiles() == 2
