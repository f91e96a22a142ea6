"""A warm process reaches its first step without the kernels' libraries:
with the store holding the kernels, a fresh process lowers
``cutecall.attention``'s forward and backward and a QuACK GEMM with neither
torch, FA4 (``flash_attn``), QuACK nor the CuTe DSL (``cutlass``) imported,
and compiles nothing (recipes: docs/cache.md)."""

import textwrap

import pytest

from shared import run_python

pytest.importorskip("flash_attn.cute")
pytest.importorskip("quack")

STEP = textwrap.dedent("""
    import sys, jax, jax.numpy as jnp, cutecall
    from cutecall.attention import attention
    from cutecall.quack import gemm
    S = jax.ShapeDtypeStruct
    q, kv = S((2, 1024, 8, 128), jnp.bfloat16), S((2, 1024, 2, 128), jnp.bfloat16)

    def loss(q, k, v):
        return attention(q, k, v, causal=True).astype(jnp.float32).sum()

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).trace(q, kv, kv)
    text = grads.lower(lowering_platforms=("cuda",)).as_text()
    a, b = S((1000, 512), jnp.bfloat16), S((768, 512), jnp.bfloat16)
    text += jax.jit(gemm.matmul).trace(a, b).lower(lowering_platforms=("cuda",)).as_text()
    libraries = sorted({m.split(".")[0] for m in sys.modules}
                       & {"torch", "flash_attn", "quack", "cutlass"})
    print(text.count("cutecall_call"), cutecall.compile_stats()["compiles"], libraries)
""")


def test_a_warm_process_lowers_attention_and_a_gemm_without_their_libraries(
        fresh_key_space):
    cold = run_python(STEP).split(maxsplit=2)
    assert cold[0] == "7" and int(cold[1]) >= 6  # 6 attention launches + the GEMM
    warm = run_python(STEP).split(maxsplit=2)
    assert warm == ["7", "0", "[]\n"] or warm == ["7", "0", "[]"]
