"""A launch object's eager call runs in C (``_core.set_eager_call``): ``k(*args)``
is ``k._eager(*args)`` with no Python frame while torch is not compiling,
and ``Kernel.__call__`` -- what torch.compile reads -- otherwise. On CPU:
the eager path reaches the C++ launcher (its own error for CPU tensors), a
compiling session and keywords take the Python ``__call__``, Dynamo traces
the custom op with ``fullgraph=True``, and a subclass keeps working."""

import pytest

torch = pytest.importorskip("torch")

import cutecall.torch as ct  # noqa: E402
from cutecall.examples import torch_kernels as tk  # noqa: E402
from cutecall.torch import _kernel  # noqa: E402


def cpu_args():
    return torch.ones(8), torch.ones(8), torch.empty(8)


def test_the_class_keeps_its_python_call_for_the_compiler():
    assert type(_kernel.Kernel.__dict__["__call__"]).__name__ == "function"


def test_an_eager_call_is_the_cpp_launchers_call(compiles):
    k = ct.kernel(tk.add3)
    errors = []
    for call in (k, k.launch):
        with pytest.raises(ValueError) as e:
            call(*cpu_args())
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    assert "'a' of 'add3' is on cpu" in errors[0]
    assert compiles() == 0


def test_eager_calls_reach_the_eager_attribute_without_python(monkeypatch):
    k = ct.kernel(tk.add3)
    seen = []
    k._eager = lambda *args: seen.append(args) or "done"
    monkeypatch.setattr(_kernel, "_is_compiling", lambda: pytest.fail("Python __call__ ran"))
    assert k(1, 2, 3) == "done"
    assert seen == [(1, 2, 3)]


def test_while_compiling_the_call_goes_to_the_custom_op(monkeypatch):
    k = ct.kernel(tk.add3)
    ops = []
    k._op = lambda *args: ops.append(len(args))
    monkeypatch.setattr(torch.compiler, "_is_compiling_flag", True)
    k(*cpu_args())
    assert ops == [3]


def test_keywords_get_the_python_calls_error():
    k = ct.kernel(tk.add3)
    a, b, c = cpu_args()
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        k(a, b, c=c)


def test_dynamo_traces_the_custom_op_in_one_graph():
    k = ct.kernel(tk.add3)
    graphs = []

    class Traced(Exception):
        pass

    def backend(gm, inputs):
        graphs.append(gm)

        def run(*args):
            raise Traced  # the CPU tensors are not launched
        return run

    def f(x, y, out):
        k(x, y, out)
        return out

    torch._dynamo.reset()
    with pytest.raises(Traced):
        torch.compile(f, fullgraph=True, backend=backend)(*cpu_args())
    targets = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert len(targets) == 1 and targets[0].startswith("cutecall."), targets


def test_a_subclass_runs_its_python_call():
    class Logged(_kernel.Kernel):
        def __call__(self, *args):
            return ("logged", len(args))

    k = Logged(tk.add3)
    assert k(1, 2) == ("logged", 2)
