"""``cutecall pack``: build, install and show kernel packs (docs/cache.md,
"Packs").

    cutecall pack build attention --arch sm_90a,sm_100a --out attention.pack
    cutecall pack build gemm --arch sm_90a --out gemm.pack
    cutecall pack build mymodule:configs --arch sm_90a --out my.pack
    cutecall pack install attention.pack      # into the store (and the remote)
    cutecall pack show attention.pack

A SOURCE is ``attention`` (``cutecall.attention``'s common configurations),
``gemm`` (``cutecall.quack``'s GEMM tiles), or ``module:function``: a
function ``(arch, **options)`` yielding zero-argument functions, each making
the recipe calls of one configuration (tracing and lowering them is enough).
``--head-dims 64,128`` and ``--dtypes bfloat16`` pass options to it.
Exit status: 0 done, 1 failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

SOURCES = {"attention": "cutecall.attention.pack:configs",
           "gemm": "cutecall.quack.pack:configs"}


def _source(name: str):
    module, _, function = SOURCES.get(name, name).partition(":")
    if not function:
        raise ValueError(f"cutecall pack: SOURCE {name!r} must be one of "
                         f"{', '.join(SOURCES)} or module:function")
    return getattr(importlib.import_module(module), function)


def _ints(text: str) -> tuple:
    return tuple(int(x) for x in text.split(",") if x)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cutecall pack", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="compile a source's configurations into a pack")
    b.add_argument("source", help="attention, gemm or module:function")
    b.add_argument("--arch", required=True, help="comma-separated, e.g. sm_90a,sm_100a")
    b.add_argument("--out", required=True, help="the pack directory to write")
    b.add_argument("--head-dims", type=_ints, default=None, help="e.g. 64,128")
    b.add_argument("--dtypes", default=None, help="e.g. bfloat16,float16")
    b.add_argument("--overwrite", action="store_true")
    for name, text in (("install", "put a pack's kernels and recipes into the store"),
                       ("show", "print a pack's table")):
        sub.add_parser(name, help=text).add_argument("pack")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as e:
        return int(e.code or 0)
    from . import _pack
    from .._driver import packs
    try:
        if args.action == "build":
            options = {k: v for k, v in (("head_dims", args.head_dims), ("dtypes", (
                tuple(args.dtypes.split(",")) if args.dtypes else None))) if v}
            doc = _pack.build_pack(args.out, _source(args.source),
                                   archs=[a for a in args.arch.split(",") if a],
                                   name=args.source, overwrite=args.overwrite, **options)
            print(f"cutecall pack: {args.out}: {doc['kernels']} kernels, "
                  f"{len(doc['recipes'])} recipes, {', '.join(doc['archs'])}, "
                  f"{doc['build-seconds']} s")
        elif args.action == "install":
            counts = _pack.install_pack(args.pack)
            print(f"cutecall pack: installed {args.pack}: {counts['recipes']} recipes, "
                  f"{counts['kernels']} kernels new to the store "
                  f"({counts['entries']} in the pack)")
        else:
            print(json.dumps(packs.read_table(args.pack), indent=1, sort_keys=True))
    except (ValueError, OSError, RuntimeError, ImportError) as e:
        print(f"cutecall pack: {e}", file=sys.stderr)
        return 1
    return 0
