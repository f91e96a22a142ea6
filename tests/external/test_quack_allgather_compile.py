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


def test_across_devices_jax_gathers_with_xla_then_runs_the_kernel_per_device():
    """``corpus.quack_allgather_corpus.sharded_jax`` on 2 CPU devices,
    lowered for the cuda platform: XLA's all-gather of A's row shards, then
    one cutecall call per device on the whole A (QuACK's kernel, every shard
    arrived)."""
    from shared import run_on_cpu_devices
    results = run_on_cpu_devices("""
        import os, sys
        os.environ.setdefault("QUACK_ARCH", "sm_90")
        sys.path.insert(0, %r)
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from corpus import quack_allgather_corpus as ag
        mesh = Mesh(np.array(jax.devices()), ("x",))
        m, n, k = 512, 256, 128
        def sds(shape, dtype, spec):
            return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))
        args = (sds((m, k), jnp.bfloat16, P("x")), sds((n, k), jnp.bfloat16, P()),
                sds((2,), jnp.int32, P()), sds((1,), jnp.int32, P()))
        fn = ag.sharded_jax(mesh, False)
        text = fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        results["all_gather"] = "all_gather" in text
        results["calls"] = text.count("custom_call @cutecall_call")
        results["whole_a"] = "tensor<512x128xbf16>" in text
        results["out"] = [list(fn.eval_shape(*args).shape)]
    """ % os.path.dirname(ag.__file__).rsplit(os.sep, 1)[0], n=2)
    assert results == {"all_gather": True, "calls": 1, "whole_a": True,
                       "out": [[2, 512, 256]]}, results
