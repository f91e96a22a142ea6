"""``cutecall.torch.kernel(build, recipe=...)`` on a GPU: a first process
compiles an elementwise kernel and records it; a fresh process (the same
store) with the CuTe DSL unimportable launches it, caller-allocated and with
``allocate``, with 0 compiles and the first process's outputs. Marked
`gpu`."""

import textwrap

import pytest

torch = pytest.importorskip("torch")

from shared import BLOCKER, run_python  # noqa: E402

pytestmark = pytest.mark.gpu

STEP = textwrap.dedent("""
    import sys, torch, cutecall, cutecall.torch as ct

    def build():
        from cutecall.examples.kernels import vector_add
        return vector_add

    one = {"a": ("n",), "b": ("n",), "c": ("n",)}
    add = ct.kernel(build, recipe=("gpu-recipe", 1), name="vector_add", dims=one)
    add2 = ct.kernel(build, recipe=("gpu-recipe", 1), name="vector_add", dims=one,
                     allocate=lambda a, b: torch.empty_like(a))
    g = torch.Generator(device="cuda").manual_seed(0)
    sums = []
    for n in (4096, 8192, 1000):
        a = torch.randn(n, device="cuda", generator=g)
        b = torch.randn(n, device="cuda", generator=g)
        out = torch.empty_like(a)
        add(a, b, out)
        torch.testing.assert_close(out, a + b)
        again = add2(a, b)
        torch.testing.assert_close(again, a + b)
        sums.append(round(float(out.double().sum()), 6))
    torch.cuda.synchronize()
    dsl = sorted(m for m in sys.modules if m.split(".")[0] == "cutlass")
    print(cutecall.compile_stats()["compiles"], add.fn is None and add2.fn is None,
          len(dsl) == 0, sums)
""")


@pytest.fixture(autouse=True)
def _needs_torch_cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


def test_a_warm_process_launches_the_recorded_kernel_without_the_dsl(fresh_key_space):
    cold = run_python(STEP).split(maxsplit=3)
    assert int(cold[0]) >= 1 and cold[1:3] == ["False", "False"]
    # torch's import asks whether the DSL is installed (find_spec): torch
    # first, then every import of the DSL fails.
    warm = run_python("import torch\n" + BLOCKER + STEP).split(maxsplit=3)
    assert warm[:3] == ["0", "True", "True"]
    assert warm[3] == cold[3]  # the same inputs (seeded), the same outputs


def test_recipes_off_build_the_launcher(fresh_key_space, monkeypatch):
    run_python(STEP)
    monkeypatch.setenv("CUTECALL_RECIPES", "0")
    out = run_python(STEP).split(maxsplit=3)
    assert out[1:3] == ["False", "False"]  # built, the DSL imported
