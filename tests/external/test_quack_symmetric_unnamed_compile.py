"""QuACK's symmetric GEMM through the JAX front with no ``output_params``:
called ``(a, a, None, epi, sched, None)`` as QuACK calls it, D aliased
whole to ``epi.mAuxOut`` (D^T, a view of the same buffer). The kernel also
writes D through ``mD``, which the call leaves empty: without D passed no
binding fits (``epi`` cannot fill the tensor parameter ``mC``), so D is
passed too; the rule puts it at ``mC``, which the trace shows the kernel
only reads while it writes ``mD`` and ``epilogue_args``, so that placement
is passed over before the DSL's passes run and D lands at ``mD``: one
kernel, the binding ``output_params=("mD",)`` gives (tests/external/
corpus/quack_gemm_corpus.py names it)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("quack")

import cutecall  # noqa: E402
from corpus import quack_gemm_cases as qc  # noqa: E402
from corpus import quack_gemm_corpus as corpus  # noqa: E402
from corpus.quack_common import like  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _operands(text: str) -> str:
    return re.search(r'operands = "([^"]*)"', text).group(1)


def _aliases(text: str) -> list:
    """The operands the custom call's outputs alias (D's buffer: mAuxOut)."""
    return re.findall(r"operand_index = (\d+)", text)


def test_symmetric_output_found_at_md_without_names(fresh_key_space):
    def outputs(a, b, c, epi, sched, var):
        return like(epi.mAuxOut)
    unnamed = cutecall.cutlass_call(
        qc.kernel_object("gemm_symmetric"), output_shape_dtype=outputs,
        input_output_aliases={(3, "mAuxOut"): 0},
        input_spec={"epilogue_args.mAuxOut": cutecall.TensorSpec(mode=(1, 0))})
    _, args = corpus.case("gemm_symmetric",
                          *corpus.SHAPES["test"]["gemm_symmetric"]).jax(False, 0)
    before = cutecall.compile_stats()["entries"]
    text = unnamed.lower(*args).as_text()
    assert cutecall.compile_stats()["entries"] - before == 1
    assert _operands(text) == "mA,mB,epilogue_args.mAuxOut,mD"
    assert _aliases(text) == ["2"]  # D is the buffer given as mAuxOut
    named = corpus.jax_call("gemm_symmetric")  # output_params=("mD",): the same kernel
    named_text = named.lower(*args).as_text()
    assert _operands(named_text) == _operands(text)
    assert _aliases(named_text) == _aliases(text)
    assert cutecall.compile_stats()["entries"] - before == 1
    again = unnamed.lower(*args).as_text()  # learned: no probe, no compile
    assert _operands(again) == _operands(text)
    assert cutecall.compile_stats()["entries"] - before == 1


@pytest.mark.gpu
def test_gpu_unnamed_equals_named_bit_for_bit():
    import numpy as np
    unnamed = cutecall.cutlass_call(
        qc.kernel_object("gemm_symmetric"), output_shape_dtype=lambda a, b, c, e, s, v:
        like(e.mAuxOut), input_output_aliases={(3, "mAuxOut"): 0},
        input_spec={"epilogue_args.mAuxOut": cutecall.TensorSpec(mode=(1, 0))})
    shape = corpus.SHAPES["test"]["gemm_symmetric"]
    _, args = corpus.case("gemm_symmetric", *shape).jax(True, 0)
    d = np.asarray(unnamed(*args).astype("float32"))
    named, args = corpus.case("gemm_symmetric", *shape).jax(True, 0)  # fresh buffers
    want = np.asarray(named(*args).astype("float32"))
    np.testing.assert_array_equal(d, want)
    assert np.isfinite(want).all() and np.abs(want).max() > 0
