"""cuDNN frontend's Hopper block-sparse attention forward
(``corpus.cudnn_bsa_corpus``) compiles for sm_90a through both of
cutecall's fronts from cuDNN's own kernel object, with no output names, on
a machine without a GPU. Its outputs ``o`` and ``lse`` sit between the
inputs ``(q, k, v, o, lse, indices, counts, sizes)``: JAX binds its two
outputs there (the lowered custom call's operands, the outputs last), and
torch marks exactly them mutated. cuDNN's own JAX path compiles for
sm_100a only; this is the sm90 kernel from JAX."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cudnn.block_sparse_attention.csrc.fwd.sm90_blk128.bsa_fwd_sm90")

import jax  # noqa: E402

import cutecall  # noqa: E402
from corpus import cudnn_bsa_corpus as bsa  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(("cudnn_bsa_corpus",),
                                        ("cudnn", "cutlass", "torch", "jax")) == []


def test_both_fronts_bind_the_outputs_between_the_inputs(fresh_key_space):
    case = bsa.cases("test")[0]
    b, h, s, d, _ = bsa.SHAPES["test"]["bsa_fwd_sm90"]
    k, targs = case.torch("meta", 0)
    before = _entries()
    k.compile(*targs)
    assert _entries() - before == 1
    assert k.output_params == ["o", "lse"]
    assert re.findall(r"Tensor\(\w!\) (\w+)", str(k._op._opoverload._schema)) == ["o", "lse"]

    call, args = case.jax(False, 0)
    lowered = call.lower(*args)
    text = lowered.as_text()
    assert text.count(CUSTOM_CALL) == 1
    assert re.search(r'operands = "([^"]*)"', text).group(1) == \
        "q,k,v,indices,counts,sizes,o,lse"
    assert [o.shape for o in jax.tree.leaves(lowered.out_info)] == [(b, h, s, d), (b, h, s)]
    assert _entries() - before == 2  # one kernel a front
    # A later call site binds there at once: nothing new compiles.
    call.lower(*args)
    assert _entries() - before == 2


def test_backward_torch_binds_its_tuple_shape_and_written_grads(fresh_key_space):
    # The backward takes problem_shape: Tuple[Int32, Int32, Int32, Tuple[Int32,
    # Int32]] as (sq, sk, d, (h, b)): runtime scalars, one kernel for both
    # sequence lengths. It writes dQ, dK, dV and its workspace.
    import cutecall.torch
    from cutecall.attention.block_sparse_kernels import backward_kernel
    b, h, s, d, count = bsa.SHAPES["test"]["bsa_fwd_sm90"]
    args, groups = bsa.backward_args(b, h, s, d, count, "meta")
    k = cutecall.torch.kernel(backward_kernel(d, groups), outputs=4)
    before = _entries()
    k.compile(*args)
    args2, groups2 = bsa.backward_args(b, h, 3 * s, d, count, "meta")
    assert groups2 == groups
    k.compile(*args2)
    assert _entries() - before == 1
    assert k.output_params == ["mdQ", "mdK", "mdV", "workspace"]
