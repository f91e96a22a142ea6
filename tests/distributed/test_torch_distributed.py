"""One process per device under torchrun (issue 35): DDP trains
torch_ops.Net, whose softmax is QuACK's kernel through cutecall.torch.kernel
and whose row scaling is a Helion-style kernel through cutecall's launcher;
after a few steps the parameters and losses equal one rank's at the same
global batch. CPU (make test): 2 ranks, gloo, the model's ops as torch
references on CPU, each rank compiling the softmax kernels ahead of time
from one cold, shared artifact store. GPU: 2 and 4 ranks, NCCL, with and
without CUDA graphs; and launches on a device that is not the current one."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from cutecall import _core  # noqa: E402
from launch import HERE  # noqa: E402
from shared import child_env  # noqa: E402


def gpu_count() -> int:
    return sum(_core.device_arch(i) is not None for i in range(16))


def torchrun(world, device, variant, tmp_path, store, timeout=300):
    out = tmp_path / f"{device}-{variant}-{world}"
    out.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={world}", f"{HERE}/torch_worker.py", device, variant, str(out)]
    p = subprocess.run(cmd, env=child_env(CUTECALL_CACHE_DIR=str(store), OMP_NUM_THREADS="1"),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    return ranks, torch.load(out / "params.pt")


def check_like_one(ranks, params, one, one_params, world, tol):
    assert [r["world"] for r in ranks] == [world] * world
    for r in ranks:
        torch.testing.assert_close(r["losses"], one[0]["losses"], rtol=tol, atol=tol)
    assert one[0]["losses"][-1] < one[0]["losses"][0]  # it trains
    assert sorted(params) == sorted(one_params)
    for k in params:
        torch.testing.assert_close(params[k], one_params[k], rtol=tol, atol=tol, msg=k)


def test_gloo_two_ranks_train_like_one(tmp_path):
    store = tmp_path / "store"
    ranks, params = torchrun(2, "cpu", "ddp", tmp_path, store)
    one, one_params = torchrun(1, "cpu", "ddp", tmp_path, store)
    check_like_one(ranks, params, one, one_params, 2, tol=1e-5)
    # Two kernels (softmax forward and backward): compiled once between the
    # two ranks starting cold together, loaded by the other; then by nobody.
    assert sum(r["warm"]["compiles"] for r in ranks) == 2, ranks
    assert all(r["warm"]["compiles"] + r["warm"]["disk_hits"] == 2 for r in ranks), ranks
    assert one[0]["warm"] == {"compiles": 0, "disk_hits": 2}, one


ONE_RANK: dict = {}  # variant -> one rank's GPU run


@pytest.fixture(scope="module")
def gpu_store(tmp_path_factory):
    return tmp_path_factory.mktemp("store")  # shared by the GPU runs


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["ddp", "graphs"])
@pytest.mark.parametrize("world", [2, 4])
def test_nccl_ranks_train_like_one(tmp_path, world, variant, gpu_store):
    if gpu_count() < world:
        pytest.skip(f"needs {world} GPUs, {gpu_count()} visible")
    ranks, params = torchrun(world, "cuda", variant, tmp_path, gpu_store)
    if variant not in ONE_RANK:  # one rank's run per variant, shared by the world sizes
        ONE_RANK[variant] = torchrun(1, "cuda", variant, tmp_path, gpu_store)
    one, one_params = ONE_RANK[variant]
    assert [r["device"] for r in ranks] == [f"cuda:{i}" for i in range(world)]
    check_like_one(ranks, params, one, one_params, world, tol=1e-4)
    kernels = one[0]["warm"]["disk_hits"]  # softmax fwd/bwd and the Helion kernel
    assert kernels >= 2 and one[0]["warm"]["compiles"] == 0, one
    assert all(r["warm"]["compiles"] + r["warm"]["disk_hits"] == kernels for r in ranks), ranks


@pytest.mark.gpu
def test_launch_on_a_device_that_is_not_current():
    """A tensor on cuda:1 while cuda:0 is current: the kernels launch on
    cuda:1, on that device's current stream (a side stream here, where the
    input is still being written), and leave cuda:0 current."""
    if gpu_count() < 2:
        pytest.skip("needs 2 GPUs")
    import torch_ops
    torch.cuda.set_device(0)
    side = torch.cuda.Stream(device=1)
    with torch.cuda.device(1):
        torch.cuda.set_stream(side)  # cuda:1's current stream, kept after the block
    assert torch.cuda.current_device() == 0
    assert torch.cuda.current_stream(1) == side
    try:
        a = torch.randn(2048, 2048, device="cuda:1")
        side.wait_stream(torch.cuda.default_stream(1))
        with torch.cuda.stream(side):
            x = (a @ a @ a)[:, :torch_ops.WIDTH].contiguous() / 2048  # long work on `side`
        torch.cuda.set_device(0)
        y = torch_ops.Softmax.apply(torch_ops.ScaleRows.apply(x, 0.5))  # no sync before
        assert torch.cuda.current_device() == 0 and y.device == torch.device("cuda:1")
        torch.cuda.synchronize(1)
        torch.testing.assert_close(y, torch.softmax(0.5 * x, dim=-1), rtol=1e-5, atol=1e-6)
    finally:
        with torch.cuda.device(1):
            torch.cuda.set_stream(torch.cuda.default_stream(1))
