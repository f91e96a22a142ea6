"""cuDNN frontend's Blackwell CuTe DSL kernels (``corpus.cudnn_sm100``:
the persistent GEMM + SwiGLU through cuDNN's own JAX API with cutecall's
bridge in it, the RMSNorm + Hadamard + amax norm) compile for sm_100a
through both of cutecall's fronts on a machine without a GPU: one compile a
front, outputs bound where cuDNN passes them, every cubin for sm_100a."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("cudnn.gemm.cutedsl.dense.swiglu.jax_api")
pytest.importorskip("cudnn.rmsnorm_rht_amax")

import sm100_checks  # noqa: E402
from corpus import cudnn_sm100  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CASES = {c.name: c for c in cudnn_sm100.cases()}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    with sm100_checks.session(tmp_path_factory) as compiled:
        yield compiled


def test_building_cases_imports_nothing_heavy():
    assert sm100_checks.heavy_imports_after_cases(
        "cudnn_sm100", ("cudnn", "cutlass", "torch", "jax")) == []


@pytest.mark.parametrize("name", list(CASES))
def test_compiles_once_per_front_for_sm100a(compiled, name):
    sm100_checks.check_fronts(compiled(CASES[name]), CASES[name])


def test_outputs_bind_where_cudnn_passes_them(compiled):
    gemm = compiled(cudnn_sm100.case("gemm_swiglu"))
    assert gemm.operands == ["a,b,ab12,c"]
    norm = compiled(cudnn_sm100.case("rmsnorm_rht"))
    assert norm.operands == ["x_tensor,w_tensor,o_tensor,amax_tensor"]


def test_the_bridge_is_restored():
    import sys

    import cutlass.jax
    with cudnn_sm100.cutecall_bridge():
        pass
    assert sys.modules["cudnn.jax.call"].cutlass_call is cutlass.jax.cutlass_call
