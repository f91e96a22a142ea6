"""torch's ``kernel(outputs=1)`` for outputs a placement question cannot
see at first (``_driver.outputs``): a kernel that asserts on a static
stride before it writes (``rows_first``: its trace climbs to the form with
the stride in, then tells), one that writes only through inline PTX at its
output's address (``ptx_first``), and one whose address no trace ties to a
parameter (``ptx_hidden``: refused, asking for ``outputs=``). CPU: compiles
for sm_90a on meta tensors; the GPU test launches."""

import pytest

torch = pytest.importorskip("torch")

import cutecall.torch as ct  # noqa: E402

import placement_kernels as pk  # noqa: E402


@pytest.fixture
def no_rejections(monkeypatch):
    """No form rejected by an earlier test (``cutecall.clear_cache`` keeps
    them: a rejected form is not traced again in the process)."""
    import collections
    from cutecall._driver.store import memory
    monkeypatch.setattr(memory, "_rejected", collections.OrderedDict())


def meta(*shape):
    return torch.empty(*shape, device="meta")


def test_a_kernel_that_asserts_a_stride_before_writing_marks_its_output(compiles,
                                                                       no_rejections):
    k = ct.kernel(pk.rows_first, outputs=1)
    assert k.output_params == ["w"]  # the rule, before any call
    k.compile(meta(100, 64), meta(100, 64), meta(64))
    assert k.output_params == ["out"]
    # the trace's dynamic form fails, its guided one tells; the compile
    # starts at the guided form (the dynamic one is remembered rejected)
    assert compiles() == 2


def test_a_store_through_inline_ptx_at_the_outputs_address_is_found(compiles):
    k = ct.kernel(pk.ptx_first, outputs=1)
    k.compile(meta(1000), meta(1000), meta(1000))
    assert k.output_params == ["out"] and compiles() == 1


def test_a_store_at_an_address_no_trace_ties_is_refused(compiles):
    k = ct.kernel(pk.ptx_hidden, outputs=1)
    with pytest.raises(ValueError, match=r"kernel 'ptx_hidden' stores through inline PTX"
                                         r".*outputs=.*parameters are out, x, y"):
        k.compile(meta(1000), meta(1000), meta(1000))
    assert compiles() == 0
    named = ct.kernel(pk.ptx_hidden, outputs=("out",))
    named.compile(meta(1000), meta(1000), meta(1000))
    assert named.output_params == ["out"]


@pytest.mark.gpu
def test_gpu_hidden_writes_land_in_the_output():
    x, w = torch.randn(100, 64, device="cuda"), torch.randn(64, device="cuda")
    out = torch.empty_like(x)
    ct.kernel(pk.rows_first, outputs=1)(out, x, w)
    torch.testing.assert_close(out, x * w, rtol=0, atol=0)
    a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    out = torch.empty_like(a)
    ct.kernel(pk.ptx_first, outputs=1)(out, a, b)
    torch.testing.assert_close(out, a + b, rtol=0, atol=0)
