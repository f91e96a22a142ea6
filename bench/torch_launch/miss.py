"""The part ``miss`` of ``bench/torch_launch/run.py``: what a torch launch
object's first calls cost: compile, store load, and the miss path itself.

One process, a fresh store (``CUTECALL_CACHE_DIR`` in a temporary folder),
the 3-tensor kernel ``cutecall.examples.torch_kernels.add3``:

  first_compile   the first call of the first launch object: bind, describe,
                  specialize, ``cute.compile``, load, register, launch
  miss_cached     the first call of a new launch object for the same kernel
                  and shapes (the in-process compile cache hits): the whole
                  miss path without compiling, median of ``--objects``
  miss_new_class  a call on an existing object with a length in a new
                  divisibility class (a new specialization: compiled), median
  hit             a call that hits C++ (for scale), median of 2000

Rows are ``{"path", "us"}`` so ``tools/gpu/gpu ab`` tabulates them.

  python -m bench.torch_launch.run miss --out miss.json
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def timed(fn) -> float:
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.torch_launch.run miss",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--objects", type=int, default=50)
    a = ap.parse_args(argv)
    os.environ["CUTECALL_CACHE_DIR"] = tempfile.mkdtemp(prefix="cutecall_miss_")
    import torch
    import cutecall.torch as ct
    from cutecall.examples.torch_kernels import add3

    def tensors(n):
        x = torch.ones(n, device="cuda")
        return x, x.clone(), torch.empty_like(x)
    a3 = tensors(4096)
    rows = [dict(path="first_compile", us=round(timed(lambda: ct.kernel(add3)(*a3)), 1))]
    misses = []
    for _ in range(a.objects):
        k = ct.kernel(add3)
        misses.append(timed(lambda: k(*a3)))
    rows.append(dict(path="miss_cached", us=round(statistics.median(misses), 1)))
    k = ct.kernel(add3)
    k(*a3)
    news = [timed(lambda n=n: k(*tensors(n))) for n in (4097, 4098, 4100)]
    rows.append(dict(path="miss_new_class", us=round(statistics.median(news), 1)))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        k(*a3)
    rows.append(dict(path="hit", us=round((time.perf_counter() - t0) / 2000 * 1e6, 2)))
    torch.cuda.synchronize()
    for r in rows:
        print(f"{r['path']:16s} {r['us']:12.2f} us")
    result = dict(benchmark="torch_launch/miss", device=torch.cuda.get_device_name(),
                  command=" ".join([os.path.basename(sys.executable)] + sys.argv), rows=rows)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0

