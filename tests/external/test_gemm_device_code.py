"""The two large GEMMs of issue 37's bench (the CUTLASS Operator API's sm90
GEMM, QuACK's all-gather GEMM) compile to the same GPU code through
cutecall's torch front, its JAX front and their authors' own
``cute.compile`` (as the Operator API and QuACK call it): the cubin
embedded in each front's object is byte for byte the authors'.

So a torch-front time above the JAX front's or the authors' on these
kernels (bench/results/external.md) is not a weaker specialization
(dynamic layouts, alignment, divisibility, tile scheduler): the device
code is one and the same. The torch front passes each stride as its own
i64 and the JAX front compact layouts; both reach the kernel as the same
TMA descriptors and grid. bench/external (its part ``families``) times them
on the GPU.

One compile per front (``entries``): the JAX front's all-gather call also
runs placement probes (traces stopped early, counted in ``compiles``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass.operators")
pytest.importorskip("quack.distributed")

import cutecall  # noqa: E402
from corpus import cutlass_operators_corpus as operators  # noqa: E402
from corpus import quack_allgather_corpus as allgather  # noqa: E402
from device_code import cubins  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def fronts_device_code(case) -> tuple[list, list]:
    """(torch front's cubins, JAX front's cubins) of `case`, each compiled
    once here (no GPU: meta tensors, abstract arrays)."""
    from cutecall._driver.store import memory
    before = cutecall.compile_stats()["entries"]
    mark = memory.journal_mark()
    k, targs = case.torch("meta", 0)
    k.compile(*targs)
    call, jargs = case.jax(False, 0)
    call.lower(*jargs)
    got = memory.journal_since(mark)
    assert [how for *_, how in got] == ["compiled", "compiled"]
    assert cutecall.compile_stats()["entries"] - before == 2  # one per front
    torch_code, jax_code = (cubins(memory._entries[key].module) for key, *_ in got)
    assert len(torch_code) == 1, "one kernel image in the torch front's object"
    return torch_code, jax_code


def test_cutlass_operators_gemm_same_cubin_in_both_fronts_and_the_authors(
        fresh_key_space, monkeypatch):
    import cutlass.operators as ops
    from cutlass.operators.providers.cutedsl.gemm import sm90_static_persistent as sm90
    from torch._subclasses.fake_tensor import FakeTensorMode

    from cutecall._driver.dsl import dsl_arch
    torch_code, jax_code = fronts_device_code(operators.cases("test")[0])
    assert torch_code == jax_code

    # The Operator API's own compile (op.compile: fake compact tensors,
    # dynamic extents, 16-byte alignment), its cluster count as the case's.
    monkeypatch.setattr(sm90, "get_max_active_clusters",
                        lambda cluster: operators.HOPPER_CLUSTERS_1X1)
    with FakeTensorMode():
        a, b, out = (torch.empty(64, 64, dtype=torch.bfloat16, device="cuda")
                     for _ in range(3))
    args = ops.GemmArguments(a, b, out, accumulator_type=torch.float32)
    with dsl_arch("sm_90a"):
        artifact = operators.operator(operators.TILE["test"]).compile(args)
    authors = cubins(bytes(artifact.compiled_obj.dump_to_object("authors")))
    assert authors == torch_code


def test_quack_allgather_gemm_same_cubin_in_both_fronts_and_the_authors(fresh_key_space):
    import cutlass.cute as cute

    from cutecall._driver.dsl import dsl_arch
    torch_code, jax_code = fronts_device_code(allgather.cases("test")[0])
    assert torch_code == jax_code

    # What QuACK's gemm(..., ag_args=...) hands cute.compile (its fake
    # tensors: dynamic extents, 16-byte alignment, TVM-FFI), compiled.
    cap = allgather.captured(1)
    with dsl_arch("sm_90a"):
        compiled = cute.compile(cap.kernel, *cap.args, **cap.kwargs)
    assert cubins(bytes(compiled.dump_to_object("authors"))) == torch_code
