"""bench/cpp_bundle: bundles' host cost from C++ (issue 38), on a GPU.

Exports a 10-kernel bundle (``vector_add`` for every length, tied by
``dims=``, plus nine fixed-length specializations) with its typed header,
builds ``bench.cc`` against the installed C++ package (``cutecall
--cmakedir``; the source tree with ``--source``), and runs it in
``--processes`` fresh processes: each a cold ``Bundle::Open`` (runtime
dlopen, ten modules), a first launch, a second open, and per-launch host
time of ``BundleKernel::Run``, the typed function, the C ABI and a bare
``cuLaunchKernel`` of an empty kernel with the same parameters. Cold times:
the median over processes; per-launch: the best.

    bash tools/gpu/gpu bench cpp_bundle            # -> $OUT/cpp_bundle.json
    python3 bench/cpp_bundle/run.py --out r.json [--processes 5] [--source]

Aims: cold open + first launch < 30 ms; Run within 0.5 us of cuLaunchKernel.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def export(work: str) -> str:
    import jax
    import jax.numpy as jnp

    import cutecall
    from cutecall.examples import kernels
    n, = jax.export.symbolic_shape("n")
    s = jax.ShapeDtypeStruct((n,), jnp.float32)
    one = cutecall.TensorSpec(dims=("n",))
    like = lambda a, b: a  # noqa: E731
    calls = {"vector_add": cutecall.compile(kernels.vector_add, s, s, output_shape_dtype=like,
                                            input_spec=one, output_spec=one)}
    for i in range(1, 10):
        f = jax.ShapeDtypeStruct((1024 * i + 1,), jnp.float32)  # distinct objects
        calls[f"add_{i}"] = cutecall.compile(kernels.vector_add, f, f, output_shape_dtype=like)
    bundle = os.path.join(work, "bench.bundle")
    cutecall.export(bundle, calls, overwrite=True, header=os.path.join(work, "kernels.h"))
    return bundle


def build(work: str, source: bool) -> str:
    build_dir = os.path.join(work, "build")
    args = ["cmake", "-S", HERE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
            f"-DKERNELS_HEADER_DIR={work}"]
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    if source:
        args.append(f"-DCUTECALL_SOURCE_DIR={REPO}")
    else:
        cmakedir = subprocess.run([sys.executable, "-m", "cutecall", "--cmakedir"],
                                  capture_output=True, text=True)
        if cmakedir.returncode != 0:
            print("no installed C++ package; building from the source tree:",
                  cmakedir.stderr.strip())
            args.append(f"-DCUTECALL_SOURCE_DIR={REPO}")
        else:
            args.append(f"-Dcutecall_DIR={cmakedir.stdout.strip()}")
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2)], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(build_dir, "cpp_bundle_bench")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "cpp_bundle.json"))
    p.add_argument("--work", default="/tmp/cutecall_cpp_bundle")
    p.add_argument("--processes", type=int, default=5)
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--source", action="store_true", help="build against the source tree")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    bundle = export(args.work)
    exe = build(args.work, args.source)
    runs = []
    env = {k: v for k, v in os.environ.items() if k != "CUTECALL_DSL_RUNTIME"}
    for _ in range(args.processes):  # fresh processes: cold every time
        out = subprocess.run([exe, bundle, "--iters", str(args.iters), "--threads",
                              str(args.threads)], capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(out.stdout, out.stderr)
            return 1
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold = ("context_ms", "open_ms", "first_run_host_ms", "first_run_done_ms",
            "cold_open_first_launch_ms", "open_again_ms")
    hot = ("run_us", "typed_us", "c_abi_us", "cu_launch_kernel_us", "run_us_per_thread_worst")
    result = {k: runs[0][k] for k in ("device", "bundle_kernels", "kernel", "n", "threads",
                                      "iters", "runtime_library")}
    result.update({k: statistics.median(r[k] for r in runs) for k in cold})
    result.update({k: min(r[k] for r in runs) for k in hot})
    result["run_minus_cu_us"] = result["run_us"] - result["cu_launch_kernel_us"]
    result["processes"] = runs
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"{result['device']}: {result['bundle_kernels']}-kernel bundle, "
          f"{args.processes} processes")
    for k in cold:
        print(f"  {k:28} {result[k]:9.3f} ms (median)")
    for k in hot:
        print(f"  {k:28} {result[k]:9.3f} us/launch (best)")
    print(f"  {'run_minus_cu_us':28} {result['run_minus_cu_us']:9.3f} us (aim < 0.5)")
    print(f"  cold open + first launch aim < 30 ms: "
          f"{'met' if result['cold_open_first_launch_ms'] < 30 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
