"""Compile counts of kernels whose outputs the JAX front places by what
they write (issue 37), in a fresh key space (no store, no in-process
cache). ``compile_stats()["compiles"]`` counts DSL runs, failed traces
included.

- QuACK's all-gather GEMM called ``(a, b, None, epi, sched, None)``: one
  compile (the rule's placement, ``mC``, stops after its trace: that trace
  writes nothing and is not a compile).
- cuDNN's sm90 block-sparse attention called with no output names: its
  outputs sit between the inputs, the rule's placement and 5 probes fail
  to trace (each once: a probe does not climb the static-fallback ladder,
  and a store of the wrong element type stops any climb), the 7th placement
  compiles -- 7 DSL runs, one kernel (was 49: every failed placement
  climbed 8 static forms).
- A kernel of our own with outputs between the inputs, called the
  authors' way (outputs named): one compile.
"""

from __future__ import annotations

import os

import pytest

import cutecall

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def test_quack_allgather_jax_compiles_once(compiles):
    pytest.importorskip("torch")
    os.environ.setdefault("QUACK_ARCH", "sm_90")
    pytest.importorskip("quack.distributed")
    from corpus import quack_allgather_corpus as ag
    m, n, k, shards = ag.SHAPES["test"]["gemm_allgather"]
    call, args = ag.case(m, n, k, shards).jax(False, 0)
    before = _entries()
    call.lower(*args)
    assert compiles() == 1 and _entries() - before == 1
    call.lower(*ag.case(3 * m, n, k, 3).jax(False, 0)[1])  # same classes
    assert compiles() == 1


def test_cudnn_bsa_jax_probes_trace_each_placement_once(compiles, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("cudnn.block_sparse_attention.csrc.fwd.sm90_blk128.bsa_fwd_sm90")
    import collections
    from corpus import cudnn_bsa_corpus as bsa
    from cutecall._driver.store import memory
    bsa._calls.cache_clear()  # a call site of its own: earlier tests' learned placements
    # and no form rejected by earlier tests (cutecall.clear_cache keeps those:
    # a rejected form is not traced again in the process)
    monkeypatch.setattr(memory, "_rejected", collections.OrderedDict())
    call, args = bsa.cases("test")[0].jax(False, 0)
    before = _entries()
    call.lower(*args)
    assert _entries() - before == 1
    # 6 placements that fail to trace, 1 compile (49 before the probes
    # stopped climbing the static ladder). A form rejected earlier in the
    # process keeps its cause, so a later climb from it ends as the first one
    # did (tests/driver/test_probe_ladder.py).
    assert compiles() == 7
    call.lower(*args)  # a later call: the kernel in memory
    assert compiles() == 7


def test_own_kernel_outputs_between_named_compiles_once(compiles):
    import jax
    import jax.numpy as jnp
    import outputs_kernels as ok
    s = jax.ShapeDtypeStruct((1000,), jnp.float32)
    call = cutecall.cutlass_call(ok.out_between, output_shape_dtype=(s, s),
                                 output_params=("out", "lse"))
    text = call.lower(s, s, jax.ShapeDtypeStruct((1000,), jnp.int32)).as_text()
    assert 'operands = "q,k,index,out,lse"' in text
    assert compiles() == 1
