"""Launches from 16 Python threads at once on a GPU: one torch launch
object shared by every thread, each on its own CUDA stream with its own
tensors and runtime scalar; and one jitted JAX function with a cutecall
kernel called from every thread on its own arrays. Every result is the
thread's own (no scalar, pointer or stream crosses threads)."""

import concurrent.futures as cf
import os

import pytest

pytestmark = pytest.mark.gpu
THREADS = 16
# Calls per thread; tools/gpu/memcheck.sh takes fewer (each is checked).
CALLS = int(os.environ.get("CUTECALL_TEST_THREAD_CALLS", "200"))


def test_a_torch_launch_object_from_16_threads_on_their_own_streams():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    import cutecall.torch as ct
    from cutecall.examples import torch_kernels as tk
    k = ct.kernel(tk.axpby_2d)   # odd extents: not the specialization other tests count
    k(*(torch.ones(3, 5, device="cuda") for _ in range(3)), 1.0)  # compile once

    def work(t: int):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            x = torch.full((63, 999), float(t), device="cuda")
            y = torch.ones(63, 999, device="cuda")
            outs = [torch.empty(63, 999, device="cuda") for _ in range(4)]
            for i in range(CALLS):
                k(x, y, outs[i % 4], float(i))   # out = i * t + 1
        stream.synchronize()
        return [(o[0, 0].item(), o[-1, -1].item()) for o in outs]

    with cf.ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(work, range(THREADS)))
    for t, got in enumerate(results):
        last = [max(i for i in range(CALLS) if i % 4 == j) for j in range(4)]
        assert got == [(float(i * t + 1),) * 2 for i in last], f"thread {t}"


def test_a_jitted_cutecall_kernel_from_16_threads():
    import jax
    import jax.numpy as jnp
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    import cutecall
    from cutecall.examples import kernels
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)
    f = jax.jit(lambda a, b: add(a, b) * 2)

    def work(t: int):
        a = jnp.full((4096,), float(t), jnp.float32)
        b = jnp.arange(4096, dtype=jnp.float32)
        outs = [f(a, b + i) for i in range(CALLS)]
        return [float(o[7]) for o in jax.block_until_ready(outs)]

    with cf.ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(work, range(THREADS)))
    for t, got in enumerate(results):
        assert got == [2.0 * (t + 7 + i) for i in range(CALLS)], f"thread {t}"
