"""Host cost per launch from PyTorch: cutecall against every other way.

One process, one 3-tensor elementwise CuTe DSL kernel (``c = a + b``, float32,
n = 1024, one thread per element: ``cutecall.examples.torch_kernels.add3``),
tensors reused, ``--launches`` (20,000) back-to-back launches per trial,
``--trials`` (5) trials per path, paths interleaved round-robin so drift hits
them all alike. Reported: the best trial's host time per launch (the
enqueue loop, before the final synchronize) and its wall time per launch
(synchronize included).

Paths:
  cutecall          ``k(a, b, c)``, k = ``cutecall.torch.kernel(add3)``
  cutecall_direct   ``k.launch(a, b, c)``: the C++ launcher without the
                    torch.compile check
  cutecall_runtime_launch
                    ``k(a1, b1, c1)`` on n - 1 elements (another
                    specialization, so another module) loaded with
                    ``CUTECALL_LAUNCH_DRIVER=0``: its launches go through
                    the CUDA runtime's ``cudaLaunchKernelEx``, as before the
                    driver route (launch_record.h)
  cutecall_helion   ``cutecall.torch.default_cute_launcher(helion_add_kernel,
                    grid, a, b, c, n, 1.0)``: Helion's API on cutecall
  helion_style      Helion's own recipe: a ``@cute.jit`` wrapper taking
                    ``cute.Pointer`` + Int64 shape/stride + grid + stream,
                    ``cute.compile``d once, called from Python with fresh
                    ``make_ptr`` arguments and the current stream each launch
  tvm_ffi           ``cute.compile(add3, ..., options="--enable-tvm-ffi")``
                    (env stream) called with the torch tensors
  torch_add_        ``a.add_(1)``: PyTorch's own launch
  torch_add_out     ``torch.add(a, b, out=c)``
  ctypes_floor      ``cuLaunchKernel`` of an empty kernel through ctypes, the
                    stream handle cached: the floor for any Python launch
  ctypes_stream     the same, the stream looked up with
                    ``torch.cuda.current_stream()`` each launch
  cutecall_cpp_loop cutecall's launch repeated from one C++ loop (no Python,
                    lookup once): what the DSL's generated launch code and
                    the driver cost on this host
  c_cuLaunchKernel, c_cudaLaunchKernel, c_cudaLaunchKernelEx, c_cuLaunchKernelEx
                    an empty kernel launched from a C loop
                    (launch_floor.cu, built with nvcc here): the machine's
                    own floor, no Python at all

  python -m bench.torch_launch.run --out results.json
  python -m bench.torch_launch.run miss --out miss.json   (bench/torch_launch/miss.py)
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import sys
import time

from bench.report import versions as dist_versions
from bench.torch_launch import miss

N = 1024
THREADS = 128
PARTS = {"miss": miss.main}


def build_paths(n: int):
    import torch
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    import cutecall.torch as ct
    from cutecall.examples import torch_kernels as tk

    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    paths, keep = {}, []

    global _LOOP_LAUNCHER
    k = ct.kernel(tk.add3)
    _LOOP_LAUNCHER = k.launch
    paths["cutecall"] = lambda: k(a, b, c)
    launch = k.launch
    paths["cutecall_direct"] = lambda: launch(a, b, c)
    a1, b1, c1 = a[:n - 1], b[:n - 1], c[:n - 1]
    saved = os.environ.get("CUTECALL_LAUNCH_DRIVER")
    os.environ["CUTECALL_LAUNCH_DRIVER"] = "0"
    try:
        k(a1, b1, c1)  # compiles and loads this specialization's module now
    finally:
        if saved is None:
            del os.environ["CUTECALL_LAUNCH_DRIVER"]
        else:
            os.environ["CUTECALL_LAUNCH_DRIVER"] = saved
    paths["cutecall_runtime_launch"] = lambda: k(a1, b1, c1)
    grid = ((n + 127) // 128,)
    hk = tk.helion_add_kernel
    dcl = ct.default_cute_launcher
    paths["cutecall_helion"] = lambda: dcl(hk, grid, a, b, c, n, 1.0, block=(128, 1, 1))

    # Helion's recipe (helion/runtime: _create_cute_wrapper + make_ptr per launch).
    gmem = cute.AddressSpace.gmem
    f32 = cutlass.Float32

    def helion_args():
        args = []
        for t in (a, b, c):
            args += [make_ptr(f32, t.data_ptr(), gmem, assumed_align=16),
                     int(t.size(0)), int(t.stride(0))]
        args += [grid[0], 1, 1, cuda.CUstream(torch.cuda.current_stream().cuda_stream)]
        return args

    compiled = cute.compile(_helion_wrapper, *helion_args())
    keep.append(compiled)
    paths["helion_style"] = lambda: compiled(*helion_args())

    try:
        import tvm_ffi  # noqa: F401
        from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
        sym = cute.sym_int()
        fake = [make_fake_compact_tensor(f32, (sym,)) for _ in range(3)]
        tvm = cute.compile(tk.add3, make_fake_stream(use_tvm_ffi_env_stream=True),
                           *fake, options="--enable-tvm-ffi")
        keep.append(tvm)
        paths["tvm_ffi"] = lambda: tvm(a, b, c)
    except Exception as e:  # reported, not fatal
        print(f"tvm_ffi path unavailable: {type(e).__name__}: {e}", file=sys.stderr)

    paths["torch_add_"] = lambda: a.add_(1)
    paths["torch_add_out"] = lambda: torch.add(a, b, out=c)

    floor, floor_stream = _ctypes_floor()
    paths["ctypes_floor"] = floor
    paths["ctypes_stream"] = floor_stream
    return paths, (a, b, c, keep)


def _ctypes_floor():
    import torch
    cu = ctypes.CDLL("libcuda.so.1")
    ptx = b"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry cutecall_empty() { ret; }
"""
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    torch.cuda.init()
    torch.empty(1, device="cuda")  # primary context current
    assert cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(ptx)) == 0
    assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"cutecall_empty") == 0
    launch = cu.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + \
        [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    launch.restype = ctypes.c_int
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    f = fn.value

    def floor():
        launch(f, 1, 1, 1, 32, 1, 1, 0, stream, None, None)

    def with_stream():
        launch(f, 1, 1, 1, 32, 1, 1, 0, torch.cuda.current_stream().cuda_stream,
               None, None)
    return floor, with_stream


def _define_helion_wrapper():
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute

    from cutecall.examples import torch_kernels as tk

    @cute.jit
    def wrapper(a_ptr: cute.Pointer, a_s0: cutlass.Int64, a_st0: cutlass.Int64,
                b_ptr: cute.Pointer, b_s0: cutlass.Int64, b_st0: cutlass.Int64,
                c_ptr: cute.Pointer, c_s0: cutlass.Int64, c_st0: cutlass.Int64,
                grid_x: cutlass.Int32, grid_y: cutlass.Int32, grid_z: cutlass.Int32,
                stream: cuda.CUstream):
        a = cute.make_tensor(a_ptr, layout=cute.make_layout((a_s0,), stride=(a_st0,)))
        b = cute.make_tensor(b_ptr, layout=cute.make_layout((b_s0,), stride=(b_st0,)))
        c = cute.make_tensor(c_ptr, layout=cute.make_layout((c_s0,), stride=(c_st0,)))
        tk._add3_kernel(a, b, c).launch(grid=(grid_x, grid_y, grid_z),
                                        block=(THREADS, 1, 1), stream=stream)
    return wrapper


_helion_wrapper = None
_LOOP_LAUNCHER = None


def measure(paths, launches: int, trials: int) -> dict:
    import torch
    results = {name: [] for name in paths}
    for fn in paths.values():  # warm up: compile, load, JIT
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    for _ in range(trials):
        for name, fn in paths.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(launches):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            results[name].append(((t1 - t0) / launches * 1e6, (t2 - t0) / launches * 1e6))
    return results


def versions() -> dict:
    import torch
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda}
    out.update(dist_versions(["nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-cu13",
                              "cuda-bindings", "apache-tvm-ffi", "jax", "cutecall"]))
    return out


def main(argv=None) -> int:
    global _helion_wrapper
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in PARTS:
        return PARTS[argv[0]](argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.torch_launch.run",
                                 description=__doc__.splitlines()[0],
                                 epilog="part: miss (python -m bench.torch_launch.run miss --help)")
    ap.add_argument("--launches", type=int, default=20_000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--n", type=int, default=N)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch
    _helion_wrapper = _define_helion_wrapper()
    paths, (a, b, c, _) = build_paths(args.n)
    for name in ("cutecall", "cutecall_direct", "helion_style", "tvm_ffi", "torch_add_out"):
        if name in paths:
            c.zero_()
            paths[name]()
            torch.cuda.synchronize()
            ok = torch.allclose(c, a + b)
            print(f"check {name}: {'ok' if ok else 'WRONG'}")
            if not ok:
                return 1
    results = measure(paths, args.launches, args.trials)
    # Below Python: the same launch from one C++ loop (lookup done once).
    k_loop = []
    for _ in range(args.trials):
        torch.cuda.synchronize()
        k_loop.append(_LOOP_LAUNCHER.time_launches(args.launches, a, b, c)
                      / args.launches * 1e6)
    torch.cuda.synchronize()
    results["cutecall_cpp_loop"] = [(t, t) for t in k_loop]
    for name, us in _c_floors().items():
        results[name] = [(us, us)]
    rows = []
    for name, trials in results.items():
        host = min(t[0] for t in trials)
        wall = min(t[1] for t in trials)
        rows.append({"path": name, "host_us": host, "wall_us": wall,
                     "host_trials_us": [t[0] for t in trials]})
    device = torch.cuda.get_device_name(0)
    doc = {"benchmark": "torch_launch", "device": device,
           "driver": _driver_version(), "date": datetime.date.today().isoformat(),
           "launches": args.launches, "trials": args.trials, "n": args.n,
           "versions": versions(), "rows": rows}
    print(f"\n{device}, driver {doc['driver']}, torch {torch.__version__}, "
          f"{args.launches} launches x {args.trials} trials (best)")
    print(f"{'path':18s} {'host us/launch':>15s} {'wall us/launch':>15s}")
    for r in sorted(rows, key=lambda r: r["host_us"]):
        print(f"{r['path']:18s} {r['host_us']:15.2f} {r['wall_us']:15.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


def _c_floors() -> dict:
    """launch_floor.cu built with nvcc and run: the host cost of launching
    an empty kernel from C (driver API, runtime API, and the runtime API the
    way the CuTe DSL's generated code calls it). {} without nvcc."""
    import os
    import shutil
    import subprocess
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch_floor.cu")
    exe = "/tmp/cutecall_launch_floor"
    try:
        subprocess.run([nvcc, "-O2", "-arch=sm_90", "-o", exe, src, "-lcuda"],
                       check=True, capture_output=True, timeout=300)
        out = subprocess.run([exe], check=True, capture_output=True, text=True,
                             timeout=120).stdout
    except (OSError, subprocess.SubprocessError) as e:
        print(f"C launch floors unavailable: {e}", file=sys.stderr)
        return {}
    floors = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("cu"):
            floors["c_" + parts[0]] = float(parts[1])
    return floors


def _driver_version() -> str:
    v = ctypes.c_int()
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
    return f"{v.value // 1000}.{v.value % 1000 // 10}"


if __name__ == "__main__":
    sys.exit(main())
