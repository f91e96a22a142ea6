"""FlashAttention-4's own torch path (no cutecall): forward and backward of
one small attention, printing each step as it finishes. Run under
compute-sanitizer to see whether the sanitizer itself copes with FA4's
Hopper backward kernel, apart from cutecall:

  compute-sanitizer --tool memcheck python3 tools/gpu/fa4_own_backward.py
"""
import time

import torch
from flash_attn.cute.interface import flash_attn_func

t0 = time.perf_counter()


def step(what):
    torch.cuda.synchronize()
    print(f"{time.perf_counter() - t0:7.1f} s  {what}", flush=True)


q, k, v = (torch.randn(1, 256, 2, 128, device="cuda", dtype=torch.bfloat16,
                       requires_grad=True) for _ in range(3))
out = flash_attn_func(q, k, v)
out = out[0] if isinstance(out, tuple) else out
step("forward done")
out.backward(torch.randn_like(out))
step("backward done")
print("finite grads:", all(bool(torch.isfinite(x.grad).all()) for x in (q, k, v)), flush=True)
