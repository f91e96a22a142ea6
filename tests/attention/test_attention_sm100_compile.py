"""cutecall.attention for Blackwell on CPU: with the target sm_100a
(``CUTECALL_ARCH``), ``attention`` and its gradient lower for cuda through
FA4's sm100 kernels -- head dims 64/128/256, causal and not, GQA, packed
sequences, paged KV, split-KV decode with FA4's combine -- one compile per
config and bucket for every shape in it, and the objects hold sm_100a code
(tcgen05 MMA, no Hopper wgmma). Compiles only: the numerics run on a B200
(test_gpu_attention_sm100.py)."""

import re

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import attention  # noqa: E402
from device_code import cubins, cuobjdump, sass, sm_of  # noqa: E402

S = jax.ShapeDtypeStruct
bf16, f16, i32, f32 = jnp.bfloat16, jnp.float16, jnp.int32, jnp.float32

FWD = ["fa4_fwd"]
BWD_MHA = ["fa4_bwd", "fa4_bwd_postprocess_dq", "fa4_bwd_preprocess", "fa4_fwd"]
BWD_GQA = sorted(BWD_MHA + ["fa4_bwd_postprocess_dkv"] * 2)


@pytest.fixture(autouse=True)
def sm100(monkeypatch):
    monkeypatch.setenv("CUTECALL_ARCH", "sm_100a")


def lowered(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def launches(text: str) -> list:
    """The kernel launches in the lowered module, by kind (names less config)."""
    return sorted(re.sub(r"_(bfloat16|float16)_.*", "", n)
                  for n in re.findall(r'kernel = "([^"]+)"', text))


def grad(**options):
    def loss(q, k, v, *extra):
        kw = dict(options)
        for name, x in zip(kw.pop("_names", ()), extra):
            kw[name] = x
        return attention(q, k, v, **kw).astype(f32).sum()
    return jax.grad(loss, argnums=(0, 1, 2))


def test_gqa_prefill_and_decode_buckets_compile_once_to_blackwell_code(compiles):
    """d128 GQA, not causal: FA4's 2-CTA forward (static persistent, cluster
    of 2, two Q tiles per CTA) and its 2-CTA backward, five kernels compiled
    once for every prefill shape. A decode shape (a KV head's queries fit
    one tile) is FA4's other bucket: one Q tile, one CTA; the forward
    compiles once more, the backward is the same. The forward's object is
    sm_100a code with tcgen05 MMA (UTCHMMA) and no Hopper wgmma (HGMMA)."""
    from cutecall._driver.store import memory
    mark = memory.journal_mark()

    def run(b, sq, sk):
        q, kv = S((b, sq, 8, 128), bf16), S((b, sk, 2, 128), bf16)
        return launches(lowered(grad(), q, kv, kv))
    assert run(2, 1000, 1000) == BWD_GQA
    assert compiles() == 5
    assert run(3, 777, 500) == BWD_GQA
    assert compiles() == 5
    assert run(2, 1, 1000) == BWD_GQA
    assert compiles() == 6
    got = {name: key for key, name, _arch, how in memory.journal_since(mark)
           if how == "compiled"}
    fwd = [key for name, key in got.items() if name.startswith("fa4_fwd") and "2cta" in name]
    images = cubins(memory._entries[fwd[0]].module)
    assert [sm_of(c) for c in images] == [100]
    if cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to read the SASS")
    code = sass(images[0])
    assert "code for sm_100a" in code
    assert "UTCHMMA" in code and "HGMMA" not in code


def test_packed_causal_d64_gradient_one_compile_for_every_length(compiles):
    """Packed sequences (cu_seqlens), causal, MHA, d64: FA4's varlen
    scheduler; other totals and batch sizes reuse the four kernels."""
    def run(total, b):
        x, cu = S((total, 4, 64), bf16), S((b + 1,), i32)
        return launches(lowered(grad(causal=True, _names=("cu_seqlens_q", "cu_seqlens_k")),
                                x, x, x, cu, cu))
    assert run(300, 3) == BWD_MHA
    assert compiles() == 4
    assert run(1000, 5) == BWD_MHA
    assert compiles() == 4


def test_hd256_gradient_runs_fas_dedicated_backward(compiles):
    """Head dim 256, causal: FA4's dedicated 2-CTA backward writes dQ, dK
    and dV itself (no postprocess), after the preprocess's statistics."""
    q = S((1, 512, 4, 256), bf16)
    assert launches(lowered(grad(causal=True), q, q, q)) == \
        ["fa4_bwd", "fa4_bwd_preprocess", "fa4_fwd"]
    assert compiles() == 3


def test_paged_split_kv_decode_one_compile_for_every_query_length(compiles):
    """Decoding from a paged KV cache with FA4's split-KV heuristic
    (``num_splits=0``; 148 SMs of the B200 target): the split forward
    writes float32 partials and FA4's combine reduces them; 1, 4 or 16 new
    tokens and 3 or 5 sequences share both compiles."""
    pages = S((40, 128, 2, 128), bf16)
    f = lambda q, k, v, pt, u: attention(q, k, v, page_table=pt, seqused_k=u,  # noqa: E731
                                         num_splits=0)
    for b, sq in ((3, 1), (3, 4), (5, 16)):
        assert launches(lowered(f, S((b, sq, 8, 128), bf16), pages, pages,
                                S((b, 16), i32), S((b,), i32))) == ["fa4_fwd",
                                                                   "fa4_fwd_combine"]
    assert compiles() == 2
