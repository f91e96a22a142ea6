"""On a B200-class GPU (sm_100a): sm100 corpus kernels run through
cutecall's torch front and give what their authors' paths give -- FA4's
forward bit for bit against ``interface._flash_attn_fwd``, QuACK's and the
Operator API's GEMMs within bf16 rounding of a float32 matmul. Skipped on
any other GPU (the corpus compiles for sm_100a, which runs on compute
capability 10.0 only)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cutecall import _core  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.skipif(_core.device_arch(0) != "sm_100a",
                                 reason="needs an sm_100a GPU (B200/GB200)")]


def _on_gpu(args, seed=0):
    """The case's meta tensors as random CUDA tensors of their shapes and
    dtypes (outputs too: the kernels overwrite them); other arguments as
    they are."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            x = torch.randn(tuple(a.shape), generator=gen, device="cuda")
            out.append(x.to(a.dtype))
        else:
            out.append(a)
    return out


@pytest.mark.parametrize("kernel", ["fwd_causal", "fwd_dense_persistent"])
def test_fa4_forward_matches_fa4(kernel):
    pytest.importorskip("flash_attn.cute.flash_fwd_sm100")
    from flash_attn.cute import interface

    from corpus import fa4_sm100
    k, args = fa4_sm100._torch(kernel)
    args = _on_gpu(args)
    q, kk, v, o, lse = args[:5]
    k(*args)
    want_o, want_lse = torch.empty_like(o), torch.empty_like(lse)
    interface._flash_attn_fwd(q, kk, v, causal=kernel == "fwd_causal", out=want_o,
                              lse=want_lse)
    torch.cuda.synchronize()
    assert torch.equal(o, want_o) and torch.equal(lse, want_lse)


@pytest.mark.parametrize("module, kernel", [("quack_sm100", "gemm_256x256"),
                                            ("quack_sm100", "gemm_128x256"),
                                            ("cutlass_operators_sm100", None)])
def test_gemms_match_a_float32_matmul(module, kernel):
    import importlib
    corpus = importlib.import_module(f"corpus.{module}")
    k, args = corpus._torch(kernel) if kernel else corpus._torch()
    args = _on_gpu(args)
    a, b, d = args[:3]
    k(*args)
    torch.cuda.synchronize()
    want = a.float() @ b.float()
    torch.testing.assert_close(d.float(), want, atol=0.25, rtol=2e-2)
