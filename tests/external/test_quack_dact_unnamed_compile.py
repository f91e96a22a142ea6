"""QuACK's dact GEMM through the JAX front with no ``output_params``: called
``(a, b, preact, epi, sched, None)``, the output sits between inputs
(``mD``, before ``mC`` = preact). The rule never puts ``EpilogueArguments``
(a container) in the tensor parameter ``mC``, so the first placement
compiles, and the kernel's writes (mD) place D: one kernel, D at mD, preact
at mC, as ``output_params=("mD",)`` binds it (tests/external/corpus/
quack_gemm_corpus.py names it)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("quack")

import cutecall  # noqa: E402
from corpus import quack_gemm_cases as qc  # noqa: E402
from corpus import quack_gemm_corpus as corpus  # noqa: E402
from corpus.quack_common import like, sds  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _operands(text: str) -> str:
    return re.search(r'operands = "([^"]*)"', text).group(1)


def test_dact_output_found_between_inputs_without_names(fresh_key_space):
    def outputs(a, b, c, epi, sched, var):
        return sds((a.shape[0], b.shape[-1]), a.dtype), like(epi.mAuxOut)
    unnamed = cutecall.cutlass_call(qc.kernel_object("gemm_dact"), output_shape_dtype=outputs,
                                    input_output_aliases={(3, "mAuxOut"): 1})
    _, args = corpus.case("gemm_dact", *corpus.SHAPES["test"]["gemm_dact"]).jax(False, 0)
    before = cutecall.compile_stats()["entries"]
    text = unnamed.lower(*args).as_text()
    assert cutecall.compile_stats()["entries"] - before == 1
    assert _operands(text) == "mA,mB,mC,epilogue_args.mAuxOut,mD"
    named = corpus.jax_call("gemm_dact")  # output_params=("mD",): the same kernel
    assert _operands(named.lower(*args).as_text()) == _operands(text)
    assert cutecall.compile_stats()["entries"] - before == 1
