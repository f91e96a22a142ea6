"""One process per device under jax.distributed (issue 35): the
data-parallel attention training step with a global mesh and shard_map,
started the way multi-host jobs start (a coordinator, a rank per process)
on this host. After a few steps the weights and losses equal the
single-process run's at the same global batch; every process compiles or
loads each cutecall kernel once, from one artifact store shared by the
ranks, starting cold at the same time.

CPU (make test): 2 processes, one CPU device each, gloo collectives; the
step's attention is XLA's (cutecall kernels run only on GPUs), and each rank
lowers a cutecall kernel under the global mesh for CUDA. GPU: 2 and 4
processes, one GPU each, cutecall's FA4 step."""

import numpy as np
import pytest

from cutecall import _core
from launch import spawn


def gpu_count() -> int:
    return sum(_core.device_arch(i) is not None for i in range(16))


def run(mode, world, tmp_path, store, timeout=300):
    out = tmp_path / f"{mode}-{world}"
    out.mkdir()
    results = spawn("jax_worker.py", world, mode, str(out), timeout=timeout,
                    CUTECALL_CACHE_DIR=str(store))
    return results, dict(np.load(out / "weights.npz"))


def check_like_one(results, weights, one, one_weights, world, rtol, atol):
    assert [r["rank"] for r in results] == list(range(world))
    assert all(r["process_count"] == world and r["global_devices"] == world
               for r in results), results
    assert all(len(r["local_devices"]) == 1 for r in results), results
    for r in results:  # every rank holds the same replicated weights and loss
        assert r["weights_sum"] == results[0]["weights_sum"]
        np.testing.assert_allclose(r["losses"], one["losses"], rtol=rtol)
    assert sorted(weights) == sorted(one_weights) == ["k", "q", "v"]
    for n in weights:
        np.testing.assert_allclose(weights[n], one_weights[n], rtol=rtol, atol=atol,
                                   err_msg=n)
        assert weights[n].shape == one_weights[n].shape


def test_two_cpu_processes_train_like_one_and_share_the_store(tmp_path):
    store = tmp_path / "store"  # cold, and shared by both ranks
    (one,), one_w = run("cpu", 1, tmp_path, store)
    results, weights = run("cpu", 2, tmp_path, store)
    check_like_one(results, weights, one, one_w, 2, rtol=1e-4, atol=1e-6)
    assert one["losses"][-1] < one["losses"][0]  # it trains
    assert all(r["kernel_lowered"] for r in results), results
    # Both ranks needed vector_add at once: one compiled it, the other
    # waited on the entry's lock and loaded it.
    assert sum(r["kernel_compiles"] for r in results) == 1, results
    assert all(r["kernel_compiles"] + r["kernel_disk_hits"] == 1 for r in results), results


ONE_GPU: dict = {}  # the single-process GPU run, shared by the GPU tests


@pytest.fixture(scope="module")
def gpu_store(tmp_path_factory):
    """One store for the GPU runs of this module: cold for the first (its
    ranks start cold together), warm for the next (FA4 compiles take
    seconds each)."""
    return tmp_path_factory.mktemp("store")


@pytest.mark.gpu
@pytest.mark.parametrize("world", [2, 4])
def test_gpu_processes_train_like_one(tmp_path, world, gpu_store):
    if gpu_count() < world:
        pytest.skip(f"needs {world} GPUs, {gpu_count()} visible")
    cold = not any(gpu_store.iterdir())
    results, weights = run("gpu", world, tmp_path, gpu_store, timeout=480)
    if "one" not in ONE_GPU:  # the single-process run, once per module
        ONE_GPU["one"] = run("gpu", 1, tmp_path, gpu_store)
    (one,), one_w = ONE_GPU["one"]
    check_like_one(results, weights, one, one_w, world, rtol=1e-2, atol=1e-4)
    # Each rank compiled or loaded each FA4 kernel once; together they
    # compiled each at most once (all of them when the store was cold).
    kernels = one["step_disk_hits"] + one["step_compiles"]
    assert kernels >= 2 and one["step_compiles"] == 0, one  # all from the store
    assert all(r["step_compiles"] + r["step_disk_hits"] == kernels for r in results), results
    assert sum(r["step_compiles"] for r in results) == (kernels if cold else 0), results
