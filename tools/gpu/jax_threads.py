"""Calls from many Python threads at once into one jitted JAX function,
printing each thread's progress, to tell whether a stall under
compute-sanitizer comes with cutecall's kernel or with JAX itself
(tests/test_gpu_threads.py's JAX test stalled under the sanitizer):

  compute-sanitizer --tool memcheck python3 tools/gpu/jax_threads.py --fn jnp --threads 16

`--fn cutecall`: the test's function, cutecall's vector_add then `* 2`.
`--fn jnp`: the same arithmetic in plain `jnp`, no cutecall. Either is
compiled once in the main thread first, as in the test. Each thread makes
`--calls` calls on its own arrays, made (`jnp.full`, `b + i`) in the thread
or, with `--inputs main`, beforehand in the main thread.
Past `--hang-s` seconds every thread's Python stack is printed and the
process exits with status 3.
"""
import argparse
import concurrent.futures as cf
import faulthandler
import sys
import threading
import time

t0 = time.perf_counter()
lock = threading.Lock()


def step(what):
    with lock:
        print(f"{time.perf_counter() - t0:7.1f} s  {what}", flush=True)


def build(fn):
    import jax
    import jax.numpy as jnp
    if fn == "cutecall":
        import cutecall
        from cutecall.examples import kernels
        add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)
        return jax.jit(lambda a, b: add(a, b) * 2)
    return jax.jit(lambda a, b: (a + b) * 2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fn", choices=("cutecall", "jnp"), required=True)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--hang-s", type=float, default=60.0)
    p.add_argument("--inputs", choices=("thread", "main"), default="thread",
                   help="where each thread's arrays are made (eager jnp operations)")
    a = p.parse_args()
    faulthandler.dump_traceback_later(a.hang_s, exit=True, file=sys.stdout)
    import jax
    import jax.numpy as jnp
    f = build(a.fn)
    b = jnp.arange(4096, dtype=jnp.float32)
    f(jnp.ones(4096, jnp.float32), b).block_until_ready()
    step(f"{a.fn}: compiled and ran once in the main thread")

    def inputs(t):
        return jnp.full((4096,), float(t), jnp.float32), [b + i for i in range(a.calls)]
    made = [inputs(t) for t in range(a.threads)] if a.inputs == "main" else None

    def work(t):
        x, bs = made[t] if made else inputs(t)
        outs = []
        for i in range(a.calls):
            outs.append(f(x, bs[i]))
            if i in (0, a.calls - 1):
                step(f"thread {t:2d}: call {i} enqueued")
        got = [float(o[7]) for o in jax.block_until_ready(outs)]
        step(f"thread {t:2d}: done")
        return got == [2.0 * (t + 7 + i) for i in range(a.calls)]

    with cf.ThreadPoolExecutor(a.threads) as pool:
        right = list(pool.map(work, range(a.threads)))
    faulthandler.cancel_dump_traceback_later()
    step(f"{a.fn}: {sum(right)} of {a.threads} threads right")
    sys.exit(0 if all(right) else 1)


if __name__ == "__main__":
    main()
