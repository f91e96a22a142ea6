"""``cutecall warmup``: compile task lists into the store from the command
line, e.g. in a CI job that fills the remote tier every training job then
loads from. ``cutecall warmup --help`` is its manual (``_EPILOG``)."""

from __future__ import annotations

import argparse
import importlib
import os
from typing import Any

from . import workers as _warmup_start
from .warmup import warmup


_EPILOG = """\
Each module:attr names a list of tasks, or a function returning one (see
cutecall.warmup). --remote URL sets CUTECALL_CACHE_REMOTE for this run (the
workers publish what they compile there); without it the environment's
setting, if any, is used. Exit status 1 when a task failed.

example, a CI job that fills the remote tier every training job then loads from:
  cutecall warmup mymodel.kernels:TASKS --workers 8 \\
      --remote redis://cache.internal:6379/0"""


def _tasks(ap, spec: str) -> tuple[list, str]:
    module, _, attr = spec.partition(":")
    if not attr:
        ap.error(f"tasks must be module:attr, got {spec!r}")
    try:
        found: Any = getattr(importlib.import_module(module), attr)
    except ImportError as e:
        ap.error(f"tasks {spec!r}: cannot import module {module!r} ({e})")
    except AttributeError:
        ap.error(f"tasks {spec!r}: module {module!r} has no attribute {attr!r}")
    return list(found() if callable(found) else found), module


def _remote_line() -> str | None:
    from .._driver.store import config
    tier = config.remote_tier()
    if tier is None:
        return None
    try:
        stats = tier.backend.stats()
    except Exception as e:  # noqa: BLE001 (the warm-up itself went on locally)
        return f"remote tier {tier.url}: unreachable ({type(e).__name__}: {e})"
    return f"remote tier {tier.url}: {stats['entries']} entries, {stats['bytes']} bytes"


def main(argv: list[str]) -> int:
    """``cutecall warmup module:attr [module:attr ...] [--workers N]
    [--preload MODULE] [--start METHOD] [--remote URL]``."""
    ap = argparse.ArgumentParser(
        prog="cutecall warmup", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compile task lists into the store (and the remote tier, when "
                    "set) in worker processes.",
        epilog=_EPILOG)
    ap.add_argument("tasks", nargs="+",
                    help="module:attr, a list of tasks or a function returning one")
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes (default: the CPU count, at most the "
                    "number of tasks)")
    ap.add_argument("--preload", action="append", default=[], metavar="MODULE",
                    help="a module for the workers to have imported (repeatable)")
    ap.add_argument("--start", choices=_warmup_start.START_METHODS, default="auto",
                    help="how workers start (default: auto, see cutecall.warmup)")
    ap.add_argument("--remote", metavar="URL", default=None,
                    help="publish to this remote tier (sets CUTECALL_CACHE_REMOTE)")
    args = ap.parse_args(argv)
    if args.remote is not None:
        os.environ["CUTECALL_CACHE_REMOTE"] = args.remote
        from .._driver.store import config
        try:
            config.remote_tier()    # a URL it cannot use: ValueError
        except ValueError as e:
            ap.error(str(e))
    tasks, modules = [], []
    for spec in args.tasks:
        found, module = _tasks(ap, spec)
        tasks += found
        modules.append(module)
    report = warmup(tasks, workers=args.workers, preload=[*modules, *args.preload],
                    start=args.start)
    print(report)
    line = _remote_line()
    if line:
        print(line)
    return 1 if report.failed else 0
