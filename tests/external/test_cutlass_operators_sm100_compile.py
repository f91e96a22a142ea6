"""NVIDIA's CUTLASS Operator API Blackwell GEMM
(``corpus.cutlass_operators_sm100``: ``PersistentDenseGemmKernel``, tile
256x128, cluster 2x1, 2-CTA MMA, static persistent) compiles for sm_100a
through both of cutecall's fronts from the operator's own kernel object,
with no output names, on a machine without a GPU: one compile a front, the
output bound to ``c``, its cluster count the target's."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("cutlass.operators.providers.cutedsl.gemm.sm100_persistent")

import sm100_checks  # noqa: E402
from corpus import cutlass_operators_sm100 as operators  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CASE = operators.case()


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    with sm100_checks.session(tmp_path_factory) as compiled:
        yield compiled


def test_building_cases_imports_nothing_heavy():
    assert sm100_checks.heavy_imports_after_cases(
        "cutlass_operators_sm100", ("cutlass", "torch", "jax")) == []


def test_the_operator_is_discovered_for_blackwell():
    op = operators.operator()
    assert type(op).__name__ == "PersistentDenseGemmOperator"
    assert type(op.impl).__name__ == "PersistentDenseGemmKernel"
    assert op.impl.use_static_persistent_scheduler
    assert operators.max_active_clusters() == 148 // 2  # a B200's 2-CTA clusters


def test_compiles_once_per_front_for_sm100a(compiled):
    fronts = compiled(CASE)
    sm100_checks.check_fronts(fronts, CASE)
    assert fronts.operands == ["a,b,c"]
