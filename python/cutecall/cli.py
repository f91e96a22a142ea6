"""The ``cutecall`` command (also ``python -m cutecall``).

    cutecall doctor [--json]             what this machine has, what is missing
    cutecall cache stats [--json]        both tiers: location, entries, bytes, bound
    cutecall cache list [--json]         one line per entry: key, kernel, arch, size, age, status
    cutecall cache verify [--json]       check every digest; remove corrupt entries
    cutecall cache clear                 remove every entry
    cutecall export ...                  write a bundle (``cutecall export --help``)
    cutecall pack build|install|show    kernel packs (``cutecall pack --help``)
    cutecall --cmakedir | --includedir   the installed C++ package (docs/cpp.md)
    cutecall warmup module:attr [--workers N]  compile a task list in N processes

Nothing here needs a GPU. ``doctor`` reports a missing piece (no GPU, no
PyTorch, no CuTe DSL) as a line, never as a crash. Exit status: 0 when all is
well; 1 when ``doctor`` finds a problem cutecall cannot work around or
``cache verify`` found (and removed) corrupt entries; 2 on usage errors.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import time

from ._driver import store as _store
from ._driver.store import stamps


def _store_or_exit() -> _store.ArtifactStore:
    store = _store.default_store()
    if store is None:
        raise SystemExit("cutecall: the artifact store is off (CUTECALL_CACHE=0)")
    return store


def _stamp_for(entry: _store.Entry) -> dict:
    return stamps.stamp_of(entry)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


# -- cache ----------------------------------------------------------------------
def _remote_stats() -> dict | None:
    """The remote tier's stats, or None when none is set; a tier that
    cannot be reached says so (``error``) instead of failing the command."""
    from ._driver.store import config
    tier = config.remote_tier()
    if tier is None:
        return None
    out = {"url": tier.url, "mode": "read" if tier.read_only else "readwrite",
           "signed": tier.signing_key is not None}
    try:
        out.update(tier.backend.stats())
    except Exception as e:  # noqa: BLE001 (reported, the local tier still shown)
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def cache_stats(args) -> int:
    stats = _store_or_exit().stats()
    remote = _remote_stats()
    if args.json:
        print(json.dumps({**stats, "remote": remote}, indent=2))
        return 0
    print(f"location   {stats['root']}\nentries    {stats['entries']}\n"
          f"size       {_size(stats['bytes'])} of {_size(stats['max_bytes'])}")
    if remote is None:
        print("remote     none (CUTECALL_CACHE_REMOTE is not set)")
    elif "error" in remote:
        print(f"remote     {remote['url']}: unreachable ({remote['error']})")
    else:
        print(f"remote     {remote['url']} ({remote['mode']}"
              f"{', signed' if remote['signed'] else ''})\n"
              f"           {remote['entries']} entries, {_size(remote['bytes'])}")
    return 0


def _listing(store, repair: bool) -> list[dict]:
    rows, now = [], time.time()
    by_key = dict(store.scan())
    for key, status, size in store.verify(_stamp_for, repair=repair):
        row = {"key": key, "status": status, "bytes": size,
               "age_s": round(now - by_key[key].st_mtime, 1) if key in by_key else None}
        if not status.startswith("corrupt"):
            with contextlib.suppress(FileNotFoundError, _store.CorruptEntry):
                entry = store.read(key)
                row.update(kernel=entry.meta.get("name"), arch=entry.stamp.get("arch"),
                           dsl=entry.stamp.get("dsl"), cutecall=entry.stamp.get("cutecall"))
                if entry.meta.get("rejected"):  # a form the DSL rejected
                    row.update(kind="rejected", cause=entry.meta.get("cause"))
                elif entry.meta.get("autotune"):  # an autotuning winner
                    row.update(kind="autotune", config=entry.meta.get("config"),
                               tuned_key=entry.meta.get("key"))
        rows.append(row)
    return sorted(rows, key=lambda r: r["age_s"] or 0)


def cache_list(args) -> int:
    rows = _listing(_store_or_exit(), repair=False)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    # The kernel last, whole: names such as FlashAttentionForwardSm90 are
    # longer than any fixed column.
    print(f"{'key':16}  {'arch':8}  {'size':>10}  {'used':>5}  {'status':8}  kernel")
    for r in rows:
        kernel = str(r.get("kernel", "?"))
        if r.get("kind") == "rejected":
            kernel += " (rejected)"
        elif r.get("kind") == "autotune":
            kernel = f"{r.get('kernel')} {json.dumps(r.get('config'))}"
        print(f"{r['key'][:16]:16}  {str(r.get('arch', '?')):8}  "
              f"{_size(r['bytes']):>10}  {_age(r['age_s'] or 0):>5}  "
              f"{r['status']:8}  {kernel}")
    print(f"{len(rows)} entries")
    return 0


def cache_verify(args) -> int:
    rows = _listing(_store_or_exit(), repair=True)
    bad = [r for r in rows if r["status"].startswith("corrupt")]
    stale = [r for r in rows if r["status"] == "stale"]
    if args.json:
        print(json.dumps({"checked": len(rows), "corrupt_removed": bad,
                          "stale": len(stale)}, indent=2))
    else:
        for r in bad:
            print(f"removed {r['key']}: {r['status']}")
        print(f"{len(rows)} entries checked: {len(rows) - len(bad) - len(stale)} ok, "
              f"{len(stale)} stale (other versions), {len(bad)} corrupt (removed)")
    return 1 if bad else 0


def cache_clear(args) -> int:
    store = _store_or_exit()
    removed, skipped = store.clear()
    print(f"removed {removed} entries from {store.root}"
          + (f"; {skipped} skipped (being built by another process)" if skipped else ""))
    return 0


# -- doctor ---------------------------------------------------------------------
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
    from ._driver import dsl
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
    from ._driver.store import config
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
    from ._driver import flavour
    chosen = flavour.selected()  # FlavourError: reported as an error
    return f"{chosen.name} ({chosen.how}; installed: " + \
        ", ".join(f"cu{m}" for m in sorted(flavour.installed())) + ")"


def _runtime_library():
    from ._driver import runtime as _runtime
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
    from ._driver import target
    t = target.resolve()
    return f"{t}; {_FAMILIES.get(t.capability[0], 'no product kernel family')}"


def doctor(args) -> int:
    from ._version import __version__
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
    # Without these cutecall cannot run a kernel; the rest is information.
    problems = [k for k in ("cute dsl", "dsl flavour", "runtime library", "cache")
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


# -- export ---------------------------------------------------------------------
def export(argv: list[str]) -> int:
    from .bundle import _write  # imports JAX and the bundle writer: only here
    return int(_write.export_cli(argv) or 0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cutecall", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("doctor", help="report GPU, driver, CUDA, JAX, PyTorch, "
                       "DSL, runtime library and cache health")
    d.add_argument("--json", action="store_true")
    d.set_defaults(run=doctor)
    c = sub.add_parser("cache", help="inspect or clean the artifact store")
    csub = c.add_subparsers(dest="action", required=True)
    for name, fn, text in (
            ("stats", cache_stats, "location, entries, size"),
            ("list", cache_list, "every entry with its kernel, arch, size, status"),
            ("verify", cache_verify, "check digests; remove corrupt entries"),
            ("clear", cache_clear, "remove every entry")):
        a = csub.add_parser(name, help=text)
        a.add_argument("--json", action="store_true")
        a.set_defaults(run=fn)
    for name, text in (("export", "write a bundle"), ("pack", "build, install or show a "
                       "kernel pack"), ("warmup", "compile a task list into the store in "
                                        "worker processes")):
        sub.add_parser(name, help=f"{text} (cutecall {name} --help)", add_help=False)
    return p


_COMMANDS = {"warmup": ".services.warmup_cli", "pack": ".bundle._pack_cli"}


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe surfaces here, not at exit
        return code
    except BrokenPipeError:
        # `cutecall cache list | head -1`: the reader left; no traceback.
        # stdout is broken: point it at devnull so the exit flush is quiet.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # no real stdout (captured)
            pass
        return 1


def _main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("--cmakedir", "--includedir"):
        from .bundle import _package  # the C++ package (docs/cpp.md)
        return _package.print_dir(argv[0])
    if argv and argv[0] == "export":
        return export(argv[1:])
    if argv and argv[0] in _COMMANDS:  # warm-up imports JAX in its workers only
        return importlib.import_module(_COMMANDS[argv[0]], __package__).main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except (_store.CacheError, ValueError) as e:
        print(str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
