"""QuACK's Hadamard transform (``corpus.quack_hadamard_corpus``) compiles
for sm_90a through both of cutecall's fronts from QuACK's own
``HadamardTransform`` object, with no output names, on a machine without a
GPU: one kernel per front, the output bound to ``mO`` (the parameter the
kernel writes), and a new row count or scale compiles nothing."""

from __future__ import annotations

import os
import re

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("QUACK_ARCH", "sm_90")
pytest.importorskip("quack.transform.hadamard")

import cutecall  # noqa: E402
from corpus import quack_hadamard_corpus as hadamard  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::cutecall.StaticFallbackWarning")]
CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"
ROWS, N = hadamard.SHAPES["test"]["hadamard"]


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(("quack_hadamard_corpus",),
                                        ("quack", "cutlass", "torch", "jax")) == []


def test_both_fronts_compile_once_and_bind_the_written_output(fresh_key_space):
    case = hadamard.cases("test")[0]
    call, args = case.jax(False, 0)
    before = _entries()
    text = call.lower(*args).as_text()
    assert text.count(CUSTOM_CALL) == 1
    assert re.search(r'operands = "([^"]*)"', text).group(1) == "mX,mO"
    _, other = hadamard.case(ROWS + 1024, N, scale=0.5).jax(False, 0)
    call.lower(*other)
    assert _entries() - before == 1

    k, targs = case.torch("meta", 0)
    k.compile(*targs)
    _, other = hadamard.case(ROWS + 1024, N, scale=0.5).torch("meta", 0)
    k.compile(*other)
    assert _entries() - before == 2
    assert k.output_params == ["mO"]
    assert re.findall(r"Tensor\(\w!\) (\w+)", str(k._op._opoverload._schema)) == ["mO"]
