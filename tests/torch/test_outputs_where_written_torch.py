"""torch's ``kernel(outputs=n)`` marks as written the parameters the kernel
writes, wherever they sit, without names: on the first call (or compile)
the launch object asks once, before anything compiles, which parameters a
trace of the DSL stores into (``_driver.outputs.stage``), and the custom op
``torch.compile`` traces through marks exactly those as mutated. CPU:
compiles for sm_90a on meta tensors; the GPU tests launch."""

import re

import pytest

torch = pytest.importorskip("torch")

import cutecall.torch as ct

import outputs_kernels as ok

N = 1000


def meta(dtype=torch.float32, n=N):
    return torch.empty(n, dtype=dtype, device="meta")


def mutated(k) -> list[str]:
    """The custom op's arguments marked written (``Tensor(a!) name``)."""
    return re.findall(r"Tensor\(\w!\) (\w+)", str(k._op._opoverload._schema))


def test_output_first_is_the_written_one_after_the_first_compile(compiles):
    k = ct.kernel(ok.out_first, outputs=1)
    assert k.output_params == ["y"]  # the rule, before any trace
    k.compile(meta(), meta(), meta())
    assert k.output_params == ["out"]
    assert mutated(k) == ["out"]
    assert "(Tensor(a!) out, Tensor x, Tensor y) -> ()" in str(k._op._opoverload._schema)
    assert compiles() == 1


def test_outputs_between_inputs(compiles):
    k = ct.kernel(ok.out_between, outputs=2)
    k.compile(meta(), meta(), meta(), meta(), meta(torch.int32))
    assert mutated(k) == ["out", "lse"]
    assert compiles() == 1


def test_outputs_before_an_optional_input():
    k = ct.kernel(ok.out_before_optional, outputs=2)
    k.compile(meta(), meta(), meta(), meta(), meta(torch.int32))
    assert mutated(k) == ["loss", "dX"]
    k2 = ct.kernel(ok.out_before_optional, outputs=2)
    k2.compile(meta(), meta(), meta(), meta())
    assert mutated(k2) == ["loss", "dX"]


def test_outputs_last_stay(compiles):
    k = ct.kernel(ok.out_last, outputs=1)
    k.compile(meta(), meta(), meta())
    assert mutated(k) == ["out"]
    assert compiles() == 1


def test_a_cached_kernel_is_traced_not_compiled(compiles):
    from cutecall._driver.outputs import stage
    ct.kernel(ok.out_first, outputs=1).compile(meta(), meta(), meta())
    stage.forget()  # as in a process whose store held the kernel: nothing learned
    k = ct.kernel(ok.out_first, outputs=1)  # a new launcher: nothing learned
    k.compile(meta(), meta(), meta())       # found in memory: a trace tells
    assert mutated(k) == ["out"]
    assert compiles() == 1


def test_launch_objects_of_one_kernel_share_what_it_writes(compiles, monkeypatch):
    """A new launch object of a kernel another one learned is not traced
    again (the miss path of a new object stays cheap: bench/torch_launch/miss.py)."""
    from cutecall._driver.outputs import stage
    traced = []
    real = stage._trace
    monkeypatch.setattr(stage, "_trace", lambda *a, **kw: traced.append(1) or real(*a, **kw))
    ct.kernel(ok.out_first, outputs=1).compile(meta(), meta(), meta())
    for _ in range(3):
        k = ct.kernel(ok.out_first, outputs=1)
        k.compile(meta(), meta(), meta())
        assert mutated(k) == ["out"]
    assert len(traced) <= 1 and compiles() == 1


def test_launch_objects_of_one_kernel_share_where_its_outputs_go(compiles, monkeypatch):
    """A new launch object of a learned kernel does not rank the output
    placements again (about 60 us of its miss path)."""
    from cutecall._driver import binding
    ranked = []
    real = binding.written_params
    monkeypatch.setattr(binding, "written_params",
                        lambda *a, **kw: ranked.append(a[4:] + tuple(kw.values()))
                        or real(*a, **kw))
    ct.kernel(ok.out_first, outputs=1).compile(meta(), meta(), meta())
    learned = [r for r in ranked if r]  # the rule's placement (no writes) aside
    for _ in range(3):
        k = ct.kernel(ok.out_first, outputs=1)
        k.compile(meta(), meta(), meta())
        assert mutated(k) == ["out"]
    assert len([r for r in ranked if r]) == len(learned) == 1
    assert compiles() == 1


def test_a_first_call_under_torch_compile_marks_the_written_tensor(compiles):
    """No eager call, no compile before: the placement is asked on
    torch.compile's fake tensors before the custom op is built, so the op
    in the graph marks ``out`` mutated (the rule would have marked ``y``).
    CPU: meta tensors, a backend that keeps the AOT graph; the launch
    itself does nothing here."""
    from torch._dynamo.backends.common import aot_autograd
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm.code)
        return gm
    k = ct.kernel(ok.out_first, outputs=1)
    k.launch = lambda *args: None  # no GPU: the op's launch is a no-op

    def f(x, y):
        out = torch.empty_like(x)
        k(out, x, y)
        return out * 2
    torch.compile(f, backend=aot_autograd(fw_compiler=keep), fullgraph=True)(meta(), meta())
    assert k.output_params == ["out"] and mutated(k) == ["out"]
    (graph,) = graphs
    assert re.search(r"auto_functionalized\w*\(torch\.ops\.cutecall\.out_first_\d+\.default, "
                     r"x = \w+, y = \w+, _out_base_index = 0", graph), graph
    assert compiles() == 0  # asked with a trace; the launch compiles


@pytest.fixture
def reads(monkeypatch):
    """Counts the traced modules the compiles read for their writes."""
    from cutecall._driver.outputs import writes as written_params
    read = []
    real = written_params.analyze
    monkeypatch.setattr(written_params, "analyze",
                        lambda *a, **kw: read.append(1) or real(*a, **kw))
    return read


def test_outputs_by_number_read_the_writes(compiles, reads):
    ct.kernel(ok.out_first, outputs=1).compile(meta(), meta(), meta())
    assert compiles() == 1 and len(reads) == 1


def test_named_outputs_compile_without_reading_the_writes(compiles, reads):
    """Nothing would use what the trace writes: the compile does not read
    the module (a few ms for a small kernel, ~0.1 s for FA4's)."""
    k = ct.kernel(ok.out_first, outputs=("out",))
    k.compile(meta(), meta(), meta())
    assert mutated(k) == ["out"]
    assert compiles() == 1 and reads == []


def test_named_outputs_are_kept():
    k = ct.kernel(ok.out_first, outputs=("y",))
    k.compile(meta(), meta(), meta())
    assert mutated(k) == ["y"]


@pytest.mark.gpu
def test_gpu_output_first_eager_and_under_torch_compile():
    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    k = ct.kernel(ok.out_first, outputs=1)
    out = torch.empty_like(x)
    k(out, x, y)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert mutated(k) == ["out"]

    def f(x, y):
        out = torch.empty_like(x)
        k(out, x, y)
        return out * 2
    got = torch.compile(f, fullgraph=True)(x, y)
    torch.testing.assert_close(got, (x + y) * 2, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_a_first_call_under_torch_compile():
    x, y = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    k = ct.kernel(ok.out_first, outputs=1)

    def f(x, y):
        out = torch.empty_like(x)
        k(out, x, y)
        return out * 2
    got = torch.compile(f, fullgraph=True)(x, y)  # no eager call before
    torch.testing.assert_close(got, (x + y) * 2, rtol=0, atol=0)
    assert mutated(k) == ["out"]


@pytest.mark.gpu
def test_gpu_outputs_between_and_before_optional():
    q, kk = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    idx = torch.randint(0, N, (N,), device="cuda", dtype=torch.int32)
    k = ct.kernel(ok.out_between, outputs=2)
    out, lse = torch.empty_like(q), torch.empty_like(q)
    k(q, kk, out, lse, idx)
    torch.testing.assert_close(out, q + kk[idx.long()], rtol=0, atol=0)
    torch.testing.assert_close(lse, q - kk[idx.long()], rtol=0, atol=0)
    loss_k = ct.kernel(ok.out_before_optional, outputs=2)
    loss, dx = torch.empty_like(q), torch.empty_like(q)
    loss_k(q, kk, loss, dx, idx)
    torch.testing.assert_close(loss, q * kk, rtol=0, atol=0)
    torch.testing.assert_close(dx, q - idx.float(), rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_allocate_merges_the_outputs_where_the_kernel_writes():
    x, y = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    k = ct.kernel(ok.out_first, outputs=1, allocate=lambda x, y: torch.empty_like(x))
    out = k(x, y)  # merged as (out, x, y): learned before the first launch
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert k.output_params == ["out"]


def test_allocate_learns_where_to_merge_before_the_first_launch(compiles):
    k = ct.kernel(ok.out_first, outputs=1, allocate=lambda x, y: torch.empty_like(x))
    x, y, o = meta(), meta(), meta()
    merge = k.first_call.merge
    assert merge((x, y), (o,)) == [x, y, o]     # the rule's merge
    k.first_call.place(merge((x, y), (o,)))     # what the first call does: a trace
    assert merge((x, y), (o,)) == [o, x, y]
    assert compiles() == 0                      # asked without a compile
