"""A small torch model whose forward and backward run cutecall kernels on
CUDA tensors: QuACK's softmax (forward and backward) through
``cutecall.torch.kernel``, and a Helion-style ``@cute.kernel`` (scale rows)
through cutecall's ``default_cute_launcher``. On CPU tensors the same
autograd functions run torch reference ops (cutecall kernels run only on
GPUs), so the distributed wiring around them can be checked anywhere.

    net = Net()                       # fc1 -> scale rows (Helion) -> softmax (QuACK) -> fc2
    loss = torch.nn.functional.mse_loss(net(x), y)
"""

from __future__ import annotations

import functools

import torch

WIDTH, D_IN, D_OUT, ALPHA = 256, 64, 32, 0.5


@functools.lru_cache(maxsize=None)
def softmax_kernels(n: int = WIDTH):
    """(forward, backward) launch objects for QuACK's float32 softmax of
    width n: N static (as QuACK compiles it), the rows dynamic."""
    import cutlass
    import cutecall.torch
    from quack.softmax import Softmax, SoftmaxBackward
    rows = (False, True)
    fwd = cutecall.torch.kernel(Softmax(cutlass.Float32, n), static={"mX": rows, "mO": rows},
                                name=f"quack_softmax_f32_{n}")
    bwd = cutecall.torch.kernel(SoftmaxBackward(cutlass.Float32, n),
                                static={"mdY": rows, "mY": rows, "mdX": rows},
                                name=f"quack_softmax_bwd_f32_{n}")
    return fwd, bwd


def scale_rows(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha * x (2-D): the Helion-style kernel on CUDA, torch on CPU."""
    if not x.is_cuda:
        return alpha * x
    from cutecall.examples import torch_kernels as tk
    from cutecall.torch import default_cute_launcher
    x = x.contiguous()
    out = torch.empty_like(x)
    block = 128
    default_cute_launcher(tk.helion_scale_rows_kernel,
                          ((x.shape[1] + block - 1) // block, x.shape[0]), x, out, alpha,
                          block=(block, 1, 1))
    return out


class ScaleRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return scale_rows(x, alpha)

    @staticmethod
    def backward(ctx, dy):
        return scale_rows(dy, ctx.alpha), None


class Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.is_cuda:
            x = x.contiguous()
            y = torch.empty_like(x)
            softmax_kernels(x.shape[1])[0](x, y)
        else:
            y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        if dy.is_cuda:
            dy = dy.contiguous()
            dx = torch.empty_like(dy)
            softmax_kernels(dy.shape[1])[1](dy, y, dx)
            return dx
        return y * (dy - (dy * y).sum(-1, keepdim=True))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(D_IN, WIDTH)
        self.fc2 = torch.nn.Linear(WIDTH, D_OUT)

    def forward(self, x):
        return self.fc2(Softmax.apply(ScaleRows.apply(self.fc1(x), ALPHA)))


def data(batch: int):
    """(x, y) of the global batch, the same in every process."""
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch, D_IN, generator=g), torch.randn(batch, D_OUT, generator=g)
