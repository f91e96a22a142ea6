"""The ``cutecall`` command (also ``python -m cutecall``).

    cutecall doctor [--json]             what this machine has, what is missing
    cutecall cache stats [--json]        both tiers: location, entries, bytes, bound
    cutecall cache list [--json]         one line per entry: key, kernel, arch, size, age, status
    cutecall cache verify [--json]       check every digest; remove corrupt entries
    cutecall cache clear                 remove every entry
    cutecall export ...                  write a bundle (``cutecall export --help``)
    cutecall pack build|install|show     kernel packs (``cutecall pack --help``)
    cutecall --cmakedir | --includedir   the installed C++ package (docs/cpp.md)
    cutecall warmup module:attr [--workers N] [--remote URL]
                                         compile a task list in N processes

Nothing here needs a GPU. ``doctor`` reports a missing piece (no GPU, no
PyTorch, no CuTe DSL) as a line, never as a crash. Exit status: 0 when all is
well; 1 when ``doctor`` finds a problem cutecall cannot work around or
``cache verify`` found (and removed) corrupt entries; 2 on usage errors.
A module per command: ``doctor``, ``cache`` (here), ``services.warmup_cli``,
``bundle._write`` (export).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .._driver import store as _store
from . import cache, doctor


# -- export ---------------------------------------------------------------------
def export(argv: list[str]) -> int:
    from ..bundle import _write  # imports JAX and the bundle writer: only here
    return int(_write.export_cli(argv) or 0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cutecall", description=__doc__.split("\n")[0],
                                epilog="Exit status: 0 when all is well, 1 when doctor "
                                "finds a problem or cache verify removed corrupt "
                                "entries, 2 on usage errors.")
    p.add_argument("--cmakedir", action="store_true",
                   help="print the installed CMake package's directory (for "
                   "find_package(cutecall) from C++; docs/cpp.md) and exit")
    p.add_argument("--includedir", action="store_true",
                   help="print the installed C++ headers' directory and exit")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("doctor", help="report GPU, driver, CUDA, JAX, PyTorch, "
                       "DSL, runtime library and cache health")
    d.add_argument("--json", action="store_true")
    d.set_defaults(run=doctor.doctor)
    c = sub.add_parser("cache", help="inspect or clean the artifact store")
    csub = c.add_subparsers(dest="action", required=True)
    for name, fn, text in (
            ("stats", cache.cache_stats, "location, entries, size"),
            ("list", cache.cache_list, "every entry with its kernel, arch, size, status"),
            ("verify", cache.cache_verify, "check digests; remove corrupt entries"),
            ("clear", cache.cache_clear, "remove every entry")):
        a = csub.add_parser(name, help=text)
        a.add_argument("--json", action="store_true")
        a.set_defaults(run=fn)
    for name, text in (("export", "write a bundle"), ("pack", "build, install or show a "
                       "kernel pack"), ("warmup", "compile a task list into the store in "
                                        "worker processes")):
        sub.add_parser(name, help=f"{text} (cutecall {name} --help)", add_help=False)
    return p


# Commands parsed by their own modules (imported only when run).
_COMMANDS = {"warmup": "..services.warmup_cli", "pack": "..bundle._pack_cli"}


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
        from ..bundle import _package  # the C++ package (docs/cpp.md)
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
