"""torch's launch objects bind ``cutlass.Constexpr`` parameters where their
authors pass them (after the stream, first, between tensors), objects and
callables included, as the JAX front does (``binding.bind``); a GEMM object
bound at construction or passed positionally compiles once for shapes A, B
and A again. CPU: compiles for sm_90a on meta tensors; the GPU test
launches."""

import pytest

torch = pytest.importorskip("torch")

import cutlass  # noqa: E402

import cutecall.torch as ct  # noqa: E402

import constexpr_kernels as ck  # noqa: E402


def meta(n=1000):
    return torch.empty(n, device="meta")


def rms_args(n=1000, blocks=4):
    return (meta(n), meta(n), meta(n), meta(n), cutlass.Int32(n), cutlass.Int32(1),
            cutlass.Float32(1e-6), blocks)


def test_a_constexpr_after_the_stream_takes_its_positional_value(compiles):
    k = ct.kernel(ck.rms_like, outputs=1)
    k.compile(*rms_args())
    assert k.output_params == ["out"] and compiles() == 1
    k.compile(*rms_args(blocks=8))
    k.compile(*rms_args(n=2000))
    assert compiles() == 2


def test_an_object_first_and_a_lambda_last_compile_once_for_shapes_a_b_a(compiles):
    gemm, epilogue = ck.ScaledMul(2.0), (lambda v: v * 3.0)
    k = ct.kernel(ck.bmm, outputs=1)
    for n in (1000, 2000, 1000):
        k.compile(gemm, meta(n), meta(n), meta(n), epilogue)
    assert k.output_params == ["c"] and compiles() == 1


def test_a_constexpr_between_tensors(compiles):
    k = ct.kernel(ck.mix, outputs=("out",))
    k.compile(meta(), "add", meta(), meta())
    k.compile(meta(), "mul", meta(), meta())
    assert compiles() == 2


def test_an_object_bound_at_construction_keeps_its_key(compiles):
    k = ct.kernel(ck.bmm, gemm_op=ck.ScaledMul(2.0), epilogue=lambda v: v + 1.0)
    for n in (1000, 2000, 1000):
        k.compile(meta(n), meta(n), meta(n))
    assert compiles() == 1


@pytest.mark.gpu
def test_gpu_positional_constexprs_launch():
    x, w, b = (torch.randn(1000, device="cuda") for _ in range(3))
    out = torch.empty_like(x)
    ct.kernel(ck.rms_like, outputs=1)(x, w, b, out, cutlass.Int32(1000), cutlass.Int32(1),
                                      cutlass.Float32(0.5), 4)
    torch.testing.assert_close(out, x * w + b + 0.5)
    c = torch.empty_like(x)
    k = ct.kernel(ck.bmm, outputs=1)
    gemm, epilogue = ck.ScaledMul(2.0), (lambda v: v * 3.0)
    k(gemm, x, w, c, epilogue)
    torch.testing.assert_close(c, x * w * 6.0)
    k(gemm, x, w, c, epilogue)  # the C++ launcher's entry: the same objects match
    torch.testing.assert_close(c, x * w * 6.0)
