"""QuACK's all-gather GEMM kernel (``corpus.quack_allgather_corpus``) on one
GPU: every shard already arrived (``flags >= epoch``), so the kernel runs
QuACK's all-gather schedule and flag gate without a transport; both fronts
against QuACK's ``gemm(..., ag_args=...)`` on the same inputs, bit for bit
(no split-K: each tile accumulated by one CTA). The multi-GPU transport is
QuACK's runner's (symmetric memory), not cutecall's."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("quack.distributed")

from authors_checks import check_against_authors  # noqa: E402
from corpus import quack_allgather_corpus as ag  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.mark.parametrize("shards", [1, 2])
def test_allgather_gemm_matches_quack_bit_for_bit(shards):
    m, n, k, _ = ag.SHAPES["test"]["gemm_allgather"]
    check_against_authors(ag.case(m, n, k, shards), ag.jax_args_from_torch)


def test_across_gpus_from_jax_every_device_equals_one_gpu_bit_for_bit():
    """``sharded_jax``: A's row shards gathered by XLA's all-gather, the
    kernel on every GPU; each device's D equals the kernel run on one GPU
    over the whole A, bit for bit (the same tiles, each by one CTA)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    devices = jax.devices()
    if len(devices) < 2:
        pytest.skip("needs 2 GPUs")
    mesh = Mesh(np.array(devices), ("x",))
    m, n, k = 256 * len(devices), 256, 128
    ka, kb = jax.random.split(jax.random.key(7))
    a = jax.random.normal(ka, (m, k)).astype(jnp.bfloat16)
    b = jax.random.normal(kb, (n, k)).astype(jnp.bfloat16)
    ones = jnp.ones((len(devices),), jnp.int32), jnp.ones((1,), jnp.int32)
    put = lambda x, spec: jax.device_put(x, NamedSharding(mesh, spec))  # noqa: E731
    d = np.asarray(ag.sharded_jax(mesh, True)(put(a, P("x")), put(b, P()),
                                             put(ones[0], P()), put(ones[1], P())))
    sched = ag.scheduler(ag.ag_args(*ones, len(devices)), True)
    one = np.asarray(ag._calls()[0](a, b, None, ag.captured().args[4], sched, None))
    assert d.shape == (len(devices), m, n)
    for i in range(len(devices)):
        assert np.array_equal(d[i], one), f"device {i}"
