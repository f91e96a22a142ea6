"""FA4's backward preprocess with no output names, through both fronts, on
a machine without a GPU (sm_90a compiles).

``FlashAttentionBackwardPreprocess(mO, mdO, mPdPsum, mLSE, mLSElog2,
mdQaccum, mCuSeqlensQ, mSeqUsedQ, mdLSE, mRowMax, mScaleP, softmax_scale,
...)`` puts its outputs among its inputs and five ``Optional`` tensors
follow them. JAX's call ``(o, do, lse, None x5, 1.0)``: the rule puts the
outputs at ``mdLSE, mRowMax, mScaleP``, which FA4's trace rejects
(``mScaleP`` given asserts ``nheads_major``); the next placement tried
puts them right after ``lse`` (``candidates.probe_rank``: a ``None`` says
nothing about order), traces, and its trace writes ``mPdPsum, mLSElog2,
mdQaccum``: the call binds there (``outputs.stage``, before the compile).
torch's ``outputs=3`` (``d``, the tensors passed positionally) learns the
same three from a trace, and its custom op marks exactly those mutated. The corpus
(``corpus.fa4_corpus``) still names them, to keep its compiles counted.
"""

import re

import pytest

pytest.importorskip("flash_attn.cute")
torch = pytest.importorskip("torch")

import cutecall  # noqa: E402
import cutecall.torch  # noqa: E402
from cutecall._driver.outputs import stage  # noqa: E402
from corpus import fa4_corpus  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")

WRITTEN = ["mPdPsum", "mLSElog2", "mdQaccum"]


def _case():
    (case,) = [c for c in fa4_corpus.cases("test") if "bwd_preprocess" in c.name
               and "causal" not in c.name]
    return case


def test_jax_binds_the_preprocess_outputs_with_no_names(fresh_key_space):
    named, args = _case().jax(False, 0)
    call = cutecall.cutlass_call(named.launcher.fn, output_shape_dtype=named.output_shape_dtype)
    text = call.lower(*args).as_text()
    assert re.search(r'operands = "([^"]*)"', text).group(1) == \
        "mO,mdO,mLSE," + ",".join(WRITTEN)
    assert stage.known_writes(call.launcher).written == set(WRITTEN)
    # A second call site of the kernel binds there from the start.
    again = cutecall.cutlass_call(named.launcher.fn, output_shape_dtype=named.output_shape_dtype)
    assert re.search(r'operands = "([^"]*)"', again.lower(*args).as_text()).group(1) == \
        "mO,mdO,mLSE," + ",".join(WRITTEN)


def test_torch_learns_the_preprocess_outputs_from_a_count(fresh_key_space):
    k, args = _case().torch("meta", 0)
    unnamed = cutecall.torch.kernel(k.fn, outputs=3)
    unnamed.compile(*args)
    assert unnamed.output_params == WRITTEN
    schema = str(unnamed._op._opoverload._schema)
    assert re.findall(r"Tensor\(\w!\) (\w+)", schema) == WRITTEN
