"""QuACK's all-gather GEMM kernel (``corpus.quack_allgather_corpus``):
QuACK's ``GemmDefaultSm90`` object and containers captured from its
``gemm(..., ag_args=AllGatherArguments(...))`` compile for sm_90a through
both fronts on a machine without a GPU: the scheduler's ``ag`` flags and
epoch are operands by key path, both fronts find ``mD`` written with no
output named (JAX's rule placement, ``mD`` None, writes nothing), and another
shard count or M compiles nothing. Across GPUs (symmetric memory, QuACK's
runner) it is not run here."""

from __future__ import annotations

import os
import re

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("QUACK_ARCH", "sm_90")
pytest.importorskip("quack.distributed")

import cutecall  # noqa: E402
from corpus import quack_allgather_corpus as ag  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def test_the_captured_scheduler_carries_the_all_gather_fields():
    sched = ag.captured().args[5]
    assert type(sched.ag).__name__ == "AgSchedulerArguments"
    assert type(ag.captured().kernel).__name__ == "GemmDefaultSm90"


def test_both_fronts_compile_once(fresh_key_space):
    m, n, k, shards = ag.SHAPES["test"]["gemm_allgather"]
    before = _entries()
    kt, targs = ag.case(m, n, k, shards).torch("meta", 0)
    kt.compile(*targs)
    kt.compile(*ag.case(3 * m, n, k, 3).torch("meta", 0)[1])  # same classes
    assert _entries() - before == 1
    assert kt.output_params == ["mD"]

    call, args = ag.case(m, n, k, shards).jax(False, 0)
    text = call.lower(*args).as_text()
    assert text.count(CUSTOM_CALL) == 1
    assert re.search(r'operands = "([^"]*)"', text).group(1) == \
        "mA,mB,scheduler_args.ag.flags,scheduler_args.ag.epoch,mD"
    assert _entries() - before == 2
