"""torch: a parameter annotated with a NamedTuple takes a plain tuple (FA4's
``BlockSparseTensors``, as its authors pass it); the kernel gets the
annotated NamedTuple. CPU: compiles on meta tensors."""

import pytest

torch = pytest.importorskip("torch")

import cutecall.torch as ct

import outputs_kernels as ok

N = 1000


def meta():
    return torch.empty(N, device="meta")


def test_a_plain_tuple_compiles_as_the_annotated_namedtuple(compiles):
    k = ct.kernel(ok.named, outputs=1)
    kernel = k.compile(meta(), (meta(), meta()), meta())
    assert kernel.operand_names == "x,pair.a,pair.b,out"
    k.compile(meta(), ok.Pair(meta(), meta()), meta())  # the same kernel
    assert compiles() == 1


@pytest.mark.gpu
def test_gpu_plain_tuple():
    x, a, b = (torch.arange(N, device="cuda", dtype=torch.float32) * k
               for k in (1.0, 2.0, 3.0))
    out = torch.empty_like(x)
    ct.kernel(ok.named, outputs=1)(x, (a, b), out)
    torch.testing.assert_close(out, a * x + b, rtol=0, atol=0)
