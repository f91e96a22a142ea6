"""QuACK's Blackwell GEMM (``corpus.quack_sm100``: ``GemmDefaultSm100``
256x256 cluster 2x1 and 128x256 cluster 1x1, from QuACK's own compile path
for capacity (10, 0)) compiles for sm_100a through both of cutecall's
fronts on a machine without a GPU: one compile a front, D bound to mD,
tcgen05 MMAs and no Hopper MMA in every cubin."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("quack.gemm_sm100")

import sm100_checks  # noqa: E402
from corpus import quack_sm100  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CASES = {c.name: c for c in quack_sm100.cases()}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    with sm100_checks.session(tmp_path_factory) as compiled:
        yield compiled


def test_building_cases_imports_nothing_heavy():
    assert sm100_checks.heavy_imports_after_cases(
        "quack_sm100", ("quack", "cutlass", "torch", "jax")) == []


def test_quack_builds_its_sm100_configs():
    big, small = (quack_sm100.captured(k).kernel for k in quack_sm100.KERNELS)
    assert type(big).__name__ == type(small).__name__ == "GemmDefaultSm100"
    assert big.cluster_shape_mnk[:2] == (2, 1) and big.use_2cta_instrs
    assert small.cluster_shape_mnk[:2] == (1, 1) and not small.use_2cta_instrs


@pytest.mark.parametrize("name", list(CASES))
def test_compiles_once_per_front_for_sm100a(compiled, name):
    fronts = compiled(CASES[name])
    sm100_checks.check_fronts(fronts, CASES[name])
    assert fronts.operands == ["mA,mB,mD"]
