"""Launches from 16 Python threads at once on a GPU: one torch launch
object shared by every thread, each on its own CUDA stream with its own
tensors and runtime scalar; and one jitted JAX function with a cutecall
kernel called from every thread on its own arrays, once compiled and once
with every thread's first call at the same time (tracing and compiling
concurrently). Every result is the thread's own (no scalar, pointer or
stream crosses threads)."""

import concurrent.futures as cf
import os

import pytest

pytestmark = pytest.mark.gpu
THREADS = 16
# Calls per thread; tools/gpu/gpu memcheck takes fewer (each is checked).
CALLS = int(os.environ.get("CUTECALL_TEST_THREAD_CALLS", "200"))
# Threads making their first call at once; tools/gpu/gpu memcheck takes fewer
# (4 have passed under the sanitizer; 16 have not been run there since the
# threads stopped running eager operations, which stalled them).
FIRST_CALL_THREADS = int(os.environ.get("CUTECALL_TEST_FIRST_CALL_THREADS", "16"))


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


def _jitted_vector_add():
    """(f, jnp): a jitted function holding one cutecall kernel, or a skip."""
    import jax
    import jax.numpy as jnp
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    import cutecall
    from cutecall.examples import kernels
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)
    return jax.jit(lambda a, b: add(a, b) * 2), jnp


def _call_from_threads(f, jnp, threads: int):
    """Every thread calls f CALLS times on its own arrays; each result is checked.

    The arrays are made in the main thread and the results come back as
    numpy arrays: the threads run only f. (Under compute-sanitizer, JAX's
    eager operations, `b + i` or `o[7]`, from 4 to 16 threads at once stalled
    in their compiles with no cutecall in the process;
    tools/records/memcheck.md.)
    """
    import jax
    b = jnp.arange(4096, dtype=jnp.float32)
    args = [(jnp.full((4096,), float(t), jnp.float32), [b + i for i in range(CALLS)])
            for t in range(threads)]

    def work(t: int):
        a, bs = args[t]
        outs = [f(a, bi) for bi in bs]
        return [float(o[7]) for o in jax.device_get(outs)]

    with cf.ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(work, range(threads)))
    for t, got in enumerate(results):
        assert got == [2.0 * (t + 7 + i) for i in range(CALLS)], f"thread {t}"


def test_first_calls_from_many_threads_at_once_trace_compile_and_run():
    # No call before the threads: they trace f and compile its kernel at once
    # (unless an earlier test of this process compiled vector_add; this test
    # comes first in its file so that it runs before the next one).
    f, jnp = _jitted_vector_add()
    _call_from_threads(f, jnp, FIRST_CALL_THREADS)


def test_a_jitted_cutecall_kernel_from_16_threads():
    f, jnp = _jitted_vector_add()
    b = jnp.arange(4096, dtype=jnp.float32)
    f(jnp.ones(4096, jnp.float32), b + 0).block_until_ready()   # compile once
    _call_from_threads(f, jnp, THREADS)
