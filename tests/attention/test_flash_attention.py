"""cutecall.attention on CPU: argument checks, and the
forward and its gradient lowered for the cuda platform (FA4's kernels
compile for sm_90a without a GPU) for MHA and GQA, with vmap folding into
one launch per kernel."""

import re

import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from cutecall.attention import attention  # noqa: E402
from shared import run_on_cpu_devices  # noqa: E402

S = jax.ShapeDtypeStruct


def lowered(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def kernels_in(text: str) -> list:
    return sorted(re.findall(r'kernel = "([^"]+)"', text))


def loss(causal=False):
    return lambda q, k, v: attention(q, k, v, causal=causal).astype(jnp.float32).sum()


@pytest.mark.parametrize("q, k, message", [
    (S((2, 8, 4, 128), jnp.float32), S((2, 8, 4, 128), jnp.float32), "bfloat16 or float16"),
    (S((2, 8, 4, 80), jnp.bfloat16), S((2, 8, 4, 80), jnp.bfloat16), "head dim"),
    (S((2, 8, 4, 128), jnp.bfloat16), S((2, 8, 3, 128), jnp.bfloat16), "multiple of k's (3)"),
    (S((2, 8, 4, 128), jnp.bfloat16), S((3, 8, 4, 128), jnp.bfloat16), "same batch dims"),
    (S((8, 128), jnp.bfloat16), S((8, 128), jnp.bfloat16), "(..., S, H, D)"),
])
def test_bad_arguments_name_the_argument_and_value(q, k, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        jax.eval_shape(attention, q, k, k)


@pytest.mark.parametrize("b, sq, sk, h, hkv, d, dtype, causal", [
    (2, 1000, 1000, 4, 4, 128, jnp.bfloat16, False),
    (1, 777, 777, 8, 2, 64, jnp.float16, True),
])
def test_forward_and_gradient_lower_for_cuda(b, sq, sk, h, hkv, d, dtype, causal):
    q, kv = S((b, sq, h, d), dtype), S((b, sk, hkv, d), dtype)
    assert jax.eval_shape(attention, q, kv, kv).shape == q.shape
    text = lowered(jax.grad(loss(causal), argnums=(0, 1, 2)), q, kv, kv)
    names = kernels_in(text)
    assert any(n.startswith("fa4_fwd") for n in names), names
    expected_post = 3 if hkv < h else 1   # dQ, and GQA's dK and dV
    assert sum(n.startswith("fa4_bwd_postprocess") for n in names) == expected_post
    assert sum(n.startswith("fa4_bwd_") and "pre" not in n and "post" not in n
               for n in names) == 1


def test_vmap_folds_into_one_launch_per_kernel():
    q = S((3, 2, 256, 4, 128), jnp.bfloat16)
    once = kernels_in(lowered(jax.grad(loss(), argnums=(0, 1, 2)),
                              *(S(q.shape[1:], q.dtype),) * 3))
    folded = kernels_in(lowered(jax.vmap(jax.grad(loss(), argnums=(0, 1, 2))), q, q, q))
    assert folded == once


def test_leading_batch_dims_fold_and_come_back():
    q = S((3, 2, 256, 4, 64), jnp.bfloat16)
    assert jax.eval_shape(attention, q, q, q).shape == q.shape
    q3 = S((256, 4, 64), jnp.bfloat16)   # no batch dim at all
    assert jax.eval_shape(attention, q3, q3, q3).shape == q3.shape


def test_shard_map_over_heads_lowers_per_shard_and_exports():
    """Two CPU devices stand in for two GPUs: the gradient under shard_map
    (heads split: 8/2 per device -> 4/1) lowers with per-shard kernel
    operands, and jax.export serializes it with the kernels inside."""
    results = run_on_cpu_devices("""
        import re, jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        from cutecall.attention import attention
        from cutecall.jax import _targets as runtime
        mesh = jax.make_mesh((2,), ("h",))
        spec = P(None, None, "h", None)
        loss = lambda q, k, v: attention(q, k, v, causal=True).astype(jnp.float32).sum()
        grad = jax.grad(loss, argnums=(0, 1, 2))
        f = jax.jit(jax.shard_map(grad, mesh=mesh, in_specs=(spec,) * 3,
                                  out_specs=(spec,) * 3))
        q = jax.ShapeDtypeStruct((2, 384, 8, 64), jnp.bfloat16,
                                 sharding=NamedSharding(mesh, spec))
        kv = jax.ShapeDtypeStruct((2, 384, 2, 64), jnp.bfloat16,
                                  sharding=NamedSharding(mesh, spec))
        text = f.trace(q, kv, kv).lower(lowering_platforms=("cuda",)).as_text()
        results["per_shard_q"] = "tensor<2x384x4x64xbf16>" in text
        results["per_shard_kv"] = "tensor<2x384x1x64xbf16>" in text
        checks = [jax.export.DisabledSafetyCheck.custom_call(runtime.TARGET)]
        exp = jax.export.export(f, platforms=("cuda",), disabled_checks=checks)(q, kv, kv)
        again = jax.export.deserialize(exp.serialize())
        results["devices"] = again.nr_devices
        results["kernels"] = sorted(set(re.findall(r'kernel = "(fa4_[a-z_]+)', again.mlir_module())))
    """, n=2)
    assert results["per_shard_q"] and results["per_shard_kv"]
    assert results["devices"] == 2
    assert results["kernels"] == ["fa4_bwd_bfloat", "fa4_bwd_postprocess_dkv_bfloat",
                                  "fa4_bwd_postprocess_dq_bfloat",
                                  "fa4_bwd_preprocess_bfloat", "fa4_fwd_bfloat"]


def test_data_parallel_training_step_lowers_per_shard():
    """The 2-GPU training step (``attention_training.sharded_step``, what
    the 2-GPU test checks and bench/scaling times) on two CPU
    devices: the batch split (4 -> 2 per device), FA4's forward and backward
    kernels on the shard, the gradients averaged across devices."""
    results = run_on_cpu_devices("""
        import jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        from cutecall.attention import training as at
        mesh = jax.make_mesh((2,), ("b",))
        w, x, y = jax.eval_shape(lambda k: at.problem(
            k, batch=4, seqlen=256, heads=8, heads_kv=2, head_dim=64, embed=256),
            jax.random.key(0))
        put = lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype,  # noqa: E731
                                                sharding=NamedSharding(mesh, s))
        args = (jax.tree.map(lambda a: put(a, P()), w), put(x, P("b")), put(y, P("b")))
        text = at.sharded_step(mesh).trace(*args).lower(
            lowering_platforms=("cuda",)).as_text()
        results["per_shard_q"] = "tensor<2x256x8x64xbf16>" in text
        results["fwd"] = 'kernel = "fa4_fwd_bfloat16_d64_g4_causal"' in text
        results["bwd"] = 'kernel = "fa4_bwd_bfloat16_d64_g4_causal"' in text
        results["allreduce"] = "all_reduce" in text or "all-reduce" in text
    """, n=2)
    assert results == {"per_shard_q": True, "fwd": True, "bwd": True, "allreduce": True}, results


def test_sharded_step_compiles_with_the_data_parallel_options(monkeypatch):
    """``sharded_step`` hands ``DATA_PARALLEL_OPTIONS`` to ``jax.jit`` (None:
    XLA's defaults), and this jaxlib knows every option in it (an unknown
    one fails the compile with "No such compile option")."""
    from cutecall.attention import training as at
    assert jax.jit(lambda x: x * 2, compiler_options=at.DATA_PARALLEL_OPTIONS)(
        jnp.ones(4)).tolist() == [2.0] * 4
    seen = []
    real = jax.jit

    def recording(fn, **kwargs):
        seen.append(kwargs.get("compiler_options"))
        return real(fn, **kwargs)
    monkeypatch.setattr(jax, "jit", recording)
    mesh = jax.make_mesh((1,), ("b",))
    at.sharded_step(mesh)
    at.sharded_step(mesh, compiler_options=None)
    at.sharded_step(mesh, compiler_options={"xla_gpu_enable_latency_hiding_scheduler": False})
    assert seen == [at.DATA_PARALLEL_OPTIONS, None,
                    {"xla_gpu_enable_latency_hiding_scheduler": False}]
