"""``make demo``: compile a CuTe DSL kernel and run it from JAX.

On a machine without a GPU it compiles the kernel for sm_90a, prints the
custom call that JAX lowers to, and says plainly that it cannot launch.
"""

from __future__ import annotations

import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import cutecall
from cutecall._driver import dsl


def _gpus():
    try:
        return jax.devices("cuda")
    except RuntimeError:
        return []


def main() -> int:
    from cutecall.examples.kernels import vector_add

    print(f"cutecall {cutecall.__version__} | jax {jax.__version__} | "
          f"nvidia-cutlass-dsl {dsl.dsl_version()}")
    n = 1 << 20
    one_length = cutecall.TensorSpec(dims=("n",))  # a, b, c: one length n
    add = cutecall.cutlass_call(
        vector_add,
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype),
        input_spec=one_length, output_spec=one_length)

    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    t0 = time.perf_counter()
    lowered = add.lower(spec, spec, platform="cuda")
    stats = cutecall.compile_stats()
    how = ("loaded 'vector_add' from the artifact store" if stats["disk_hits"]
           and not stats["compiles"] else "compiled 'vector_add'")
    print(f"{how} for {add.arch} in {time.perf_counter() - t0:.2f} s "
          f"(compiles: {stats['compiles']}, store hits: {stats['disk_hits']})")
    call = next(l for l in lowered.as_text().splitlines()
                if "custom_call" in l and "cutecall" in l)
    call = re.sub(r'module = "[^"]*"', lambda m: f'module = "<{len(m.group(0))} '
                  'chars of ELF object>"', call)
    print("lowered custom call (cuda):\n  " + call.strip())

    gpus = _gpus()
    if not gpus:
        print("\nNo CUDA GPU is visible to JAX on this machine: the kernel was "
              "compiled and lowered, but it cannot be launched here.")
        return 0

    print(f"\nlaunching on {gpus[0].device_kind}")
    key = jax.random.key(0)
    for size in (1000, n, 3 * n + 7):
        a = jax.random.normal(key, (size,), jnp.float32)
        b = jax.random.normal(jax.random.fold_in(key, 1), (size,), jnp.float32)
        eager = add(a, b)
        jitted = jax.jit(lambda a, b: add(a, b) * 2)(a, b)
        ref = np.asarray(a) + np.asarray(b)
        err = max(float(np.max(np.abs(np.asarray(eager) - ref))),
                  float(np.max(np.abs(np.asarray(jitted) / 2 - ref))))
        print(f"  n={size:>8}: max |error| vs numpy = {err:.2e}")
        if err > 1e-5:
            print("  MISMATCH")
            return 1
    stats = cutecall.compile_stats()
    print(f"compiles: {stats['compiles']}, store hits: {stats['disk_hits']} "
          "(one kernel serves every shape)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
