"""``cutecall doctor``: what this machine has for cutecall, and what is
missing. A missing piece (no GPU, no PyTorch, no CuTe DSL) is a line, never
a crash; exit status 1 when cutecall cannot work here as configured (the
DSL does not import, no flavour can run, no runtime library, an unusable
cache directory or remote tier)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from .._driver import store as _store
from .._driver.store import stamps
from .cache import _size, _stamp_for


def _probe(fn):
    try:
        return fn()
    except Exception as e:  # doctor reports; it never crashes
        return f"error: {type(e).__name__}: {e}"


def _gpus():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None, "nvidia-smi not found"
    out = subprocess.run(
        [smi, "--query-gpu=name,compute_cap,driver_version,memory.total",
         "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        return None, (out.stderr or out.stdout).strip() or f"exit {out.returncode}"
    return [line.strip() for line in out.stdout.splitlines() if line.strip()], None


def _driver_cuda():
    import ctypes
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver (libcuda.so.1 not found)"
    version = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return "cuDriverGetVersion failed"
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def _jax():
    import jax
    try:
        gpus = [f"{d.device_kind} (sm {getattr(d, 'compute_capability', '?')})"
                for d in jax.devices("cuda")]
    except RuntimeError:
        gpus = []
    return f"{jax.__version__}; CUDA devices: {gpus or 'none'}"


def _torch():
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        return "not installed (optional)"
    import torch
    return (f"{torch.__version__} (CUDA {torch.version.cuda}; "
            f"available: {torch.cuda.is_available()})")


def _dsl():
    from .._driver import dsl
    version = dsl.dsl_version()
    if version is None:
        return "error: not installed: compiling needs pip install 'cutecall[cu12]' " \
            "or 'cutecall[cu13]'"
    try:
        import cutlass.cute  # noqa: F401  (does it import on this machine?)
    except Exception as e:
        return (f"error: nvidia-cutlass-dsl {version} installed, but import cutlass.cute "
                f"fails ({type(e).__name__}: {e}): no compiles; stored kernels "
                f"and bundles still load")
    return f"nvidia-cutlass-dsl {version} (imports)"


def _cache_health():
    store = _store.default_store()
    if store is None:
        return "off (CUTECALL_CACHE=0)"
    stats = store.stats()  # creates/checks the directories: CacheError if unsafe
    rows = store.verify(_stamp_for, repair=False)
    bad = sum(status.startswith("corrupt") for _, status, _ in rows)
    return (f"{stats['root']}: {stats['entries']} entries, {_size(stats['bytes'])} "
            f"of {_size(stats['max_bytes'])}, {bad} corrupt")


def _remote_health():
    """Whether the remote tier answers (a round trip), or why not."""
    from .._driver.store import config
    settings = config.remote_settings()  # a bad value: ValueError, reported
    if settings is None:
        return "none (CUTECALL_CACHE_REMOTE is not set)"
    tier = config.remote_tier()
    if tier is None:
        return f"error: {settings[0]}: its client library is missing (see the warning)"
    began = time.perf_counter()
    try:
        tier.backend.ping()
    except Exception as e:  # noqa: BLE001 (doctor reports)
        return f"error: {tier.url} unreachable ({type(e).__name__}: {e}); kernels " \
            "will compile locally"
    mode = "read-only" if tier.read_only else "read-write"
    return f"{tier.url} reachable in {(time.perf_counter() - began) * 1000:.1f} ms " \
        f"({mode}, {'signed' if tier.signing_key else 'unsigned'})"


def _gpu():
    gpus, why = _gpus()
    return gpus or f"none ({why})"


def _machine(gpu) -> str:
    """What this machine can do with kernels, from the gpu line."""
    if isinstance(gpu, list) and gpu:
        return "compile and launch"
    return ("compile-only machine: kernels compile and lower here (for the target "
            "arch), bundles export; nothing launches without a GPU")


def _flavour():
    from .._driver import flavour
    chosen = flavour.selected()  # FlavourError: reported as an error
    return f"{chosen.name} ({chosen.how}; installed: " + \
        ", ".join(f"cu{m}" for m in sorted(flavour.installed())) + ")"


def _runtime_library():
    from .._driver import runtime as _runtime
    path = _runtime.find_runtime_library()
    if path is None:
        return "error: not found (pip install 'cutecall[cu12]' or 'cutecall[cu13]', "\
            "or set CUTECALL_DSL_RUNTIME)"
    return path if os.path.exists(path) else f"error: {path} does not exist"


_FAMILIES = {  # product kernel families per compute capability (docs/targets.md)
    8: "attention: FA4 sm80; no QuACK GEMM", 12: "attention: FA4 sm120; no QuACK GEMM",
    9: "attention: FA4 sm90, QuACK GEMM/MLP sm90, cuDNN block-sparse",
    10: "attention: FA4 sm100 (2-CTA, split-KV), QuACK GEMM/MLP sm100"}


def _target_arch():
    from .._driver import target
    t = target.resolve()
    return f"{t}; {_FAMILIES.get(t.capability[0], 'no product kernel family')}"


def doctor(args) -> int:
    from .._version import __version__
    checks = {
        "cutecall": __version__,
        "python": sys.version.split()[0],
        "gpu": _probe(_gpu),
        "machine": None,
        "driver CUDA": _probe(_driver_cuda),
        "CUDA packages": _probe(stamps.cuda_versions) or "none found",
        "jax": _probe(_jax),
        "pytorch": _probe(_torch),
        "cute dsl": _probe(_dsl),
        "dsl flavour": _probe(_flavour),
        "runtime library": _probe(_runtime_library),
        "target arch": _probe(_target_arch),
        "cache": _probe(_cache_health),
        "remote cache": _probe(_remote_health),
    }
    checks["machine"] = _machine(checks["gpu"])
    # Without these cutecall cannot run a kernel, or not as configured (a
    # remote tier set but unusable); the rest is information.
    problems = [k for k in ("cute dsl", "dsl flavour", "runtime library", "cache",
                            "remote cache")
                if str(checks[k]).startswith("error")]
    if args.json:
        print(json.dumps({"checks": checks, "problems": problems}, indent=2,
                         default=str))
    else:
        for k, v in checks.items():
            if isinstance(v, list):
                v = "; ".join(v)
            elif isinstance(v, dict):
                v = ", ".join(f"{a} {b}" for a, b in v.items())
            print(f"{k:16} {v}")
        print("problems: " + (", ".join(problems) if problems else "none"))
    return 1 if problems else 0
