"""NVIDIA's CUTLASS Operator API Hopper GEMM
(``corpus.cutlass_operators_corpus``) compiles for sm_90a through both of
cutecall's fronts from the operator's own kernel object (``op.impl``, as
``get_operators`` discovers it), with no output names, on a machine
without a GPU: one kernel per front, the output bound to ``c`` (the
parameter the kernel writes), another M compiles nothing."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass.operators")

import cutecall  # noqa: E402
from corpus import cutlass_operators_corpus as operators  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"
M, N, K = operators.SHAPES["test"]["gemm_sm90"]


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(("cutlass_operators_corpus",),
                                        ("cutlass", "torch", "jax")) == []


def test_the_operator_is_discovered_for_hopper():
    op = operators.operator((128, 128))
    assert type(op).__name__ == "Sm90StaticPersistentGemmOperator"
    assert type(op.impl).__name__ == "Sm90StaticPersistentGemmKernel"


def test_both_fronts_compile_once_and_bind_the_written_output(fresh_key_space):
    case = operators.cases("test")[0]
    call, args = case.jax(False, 0)
    before = _entries()
    text = call.lower(*args).as_text()
    assert text.count(CUSTOM_CALL) == 1
    assert re.search(r'operands = "([^"]*)"', text).group(1) == "a,b,c"
    _, other = operators.case(M + 1024, N, K).jax(False, 0)
    call.lower(*other)
    assert _entries() - before == 1

    k, targs = case.torch("meta", 0)
    k.compile(*targs)
    _, other = operators.case(M + 1024, N, K).torch("meta", 0)
    k.compile(*other)
    assert _entries() - before == 2
    assert k.output_params == ["c"]
    assert re.findall(r"Tensor\(\w!\) (\w+)", str(k._op._opoverload._schema)) == ["c"]
