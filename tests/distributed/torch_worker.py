"""One rank of a DDP training job on torch_ops.Net, started by torchrun
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT in the environment).

  torchrun --standalone --nproc-per-node N torch_worker.py DEVICE VARIANT OUT

DEVICE: cpu (gloo; the model's ops are torch references on CPU) or cuda
(NCCL; each rank on cuda:LOCAL_RANK, the model's softmax and scale run
cutecall kernels). VARIANT: ddp, or graphs (the model's forward and backward
captured with torch.cuda.make_graphed_callables before DDP wraps it, torch's
documented way: the gradient all-reduces stay outside the graphs). Each rank
trains on its slice of one global batch; gradients are averaged by DDP. Rank r
writes OUT/rank{r}.json (losses, compile counts) and rank 0 OUT/params.pt.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_ops

DEVICE, VARIANT, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
LOCAL = int(os.environ["LOCAL_RANK"])
BATCH, STEPS, LR = 32, 3, 0.5


def warm_kernels(device) -> dict:
    """Each rank compiles or loads its kernels once, before training: on a
    GPU by running them; on CPU ahead of time (Kernel.compile with meta
    tensors; the store is shared by the ranks)."""
    import cutecall
    before = cutecall.compile_stats()
    fwd, bwd = torch_ops.softmax_kernels()
    rows = BATCH // WORLD
    meta = torch.empty(rows, torch_ops.WIDTH, device="meta")
    if device.type == "cpu":
        fwd.compile(meta, meta, arch="sm_90a")
        bwd.compile(meta, meta, meta, arch="sm_90a")
    else:
        x = torch.randn(rows, torch_ops.WIDTH, device=device, requires_grad=True)
        torch_ops.Softmax.apply(torch_ops.ScaleRows.apply(x, 1.0)).sum().backward()
        torch.cuda.synchronize(device)
    after = cutecall.compile_stats()
    return {k: after[k] - before[k] for k in ("compiles", "disk_hits")}


def main():
    cuda = DEVICE == "cuda"
    if cuda:
        torch.cuda.set_device(LOCAL)
    device = torch.device(f"cuda:{LOCAL}" if cuda else "cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    result = {"rank": RANK, "world": dist.get_world_size(), "device": str(device),
              "warm": warm_kernels(device)}
    torch.manual_seed(0)
    net = torch_ops.Net().to(device)
    x, y = torch_ops.data(BATCH)
    per = BATCH // WORLD
    x, y = x[RANK * per:(RANK + 1) * per].to(device), y[RANK * per:(RANK + 1) * per].to(device)
    if VARIANT == "graphs":
        net = torch.cuda.make_graphed_callables(net, (x,))
    model = DDP(net, device_ids=[LOCAL] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean) / WORLD)
    result["losses"] = losses
    with open(os.path.join(OUT, f"rank{RANK}.json"), "w") as f:
        json.dump(result, f)
    if RANK == 0:
        torch.save({k: v.detach().cpu() for k, v in net.state_dict().items()},
                   os.path.join(OUT, "params.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
