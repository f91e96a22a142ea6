"""FlashAttention-4's varlen scheduling helpers (``corpus.fa4_varlen_corpus``)
compile for sm_90a through both of cutecall's fronts from FA4's own kernel
objects, with no output names, on a machine without a GPU: the tile cumsum
writes its first parameter (``mCuBlocks``, before its inputs), the inverse
its last; one kernel per front; another batch size in the same divisibility class
compiles nothing."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flash_attn.cute.cu_blocks_kernel")

import cutecall  # noqa: E402
from corpus import fa4_varlen_corpus as varlen  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"
WRITTEN = {"fa4.tile_cumsum": (["mCuBlocks"], "mCuSeqlens,mCuBlocks"),
           "fa4.blocks_to_batch": (["mBlocksToBatchIdx"], "mCuTotalBlocks,mBlocksToBatchIdx")}


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(("fa4_varlen_corpus",),
                                        ("flash_attn", "cutlass", "torch", "jax")) == []


@pytest.mark.parametrize("which", [0, 1], ids=list(varlen.KERNELS))
def test_both_fronts_bind_the_written_output(which, fresh_key_space):
    case = varlen.cases("test")[which]
    params, operands = WRITTEN[case.name.split("[")[0]]
    before = _entries()
    k, targs = case.torch("meta", 0)
    k.compile(*targs)
    if which == 0:  # 15 sequences: cu_seqlens (16,), the same class as (8,)
        k.compile(*varlen.tile_cumsum_case(15).torch("meta", 0)[1])
    assert _entries() - before == 1
    assert k.output_params == params
    assert re.findall(r"Tensor\(\w!\) (\w+)", str(k._op._opoverload._schema)) == params

    call, args = case.jax(False, 0)
    text = call.lower(*args).as_text()
    assert text.count(CUSTOM_CALL) == 1
    assert re.search(r'operands = "([^"]*)"', text).group(1) == operands
    if which == 0:
        call.lower(*varlen.tile_cumsum_case(15).jax(False, 0)[1])
    assert _entries() - before == 2
