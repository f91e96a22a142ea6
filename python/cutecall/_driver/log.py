"""cutecall's log: ``logging.getLogger("cutecall")`` records every compile
(kernel, arch, seconds, specialization), every artifact-store hit, miss and
eviction, and every static fallback, at level INFO.

Nothing is printed unless the application configures logging, or the
environment asks: ``CUTECALL_LOG=info`` (or ``debug``, ``warning``) prints
the records to stderr, each line with its local time to the millisecond
(``2026-11-24 13:45:01.123 cutecall INFO: ...``). A corrupt store entry is
logged at WARNING, which Python prints to stderr even then. Example::

    import logging
    logging.basicConfig()
    logging.getLogger("cutecall").setLevel(logging.INFO)
"""

from __future__ import annotations

import logging
import os
import warnings

logger = logging.getLogger("cutecall")
ENV = "CUTECALL_LOG"
# 2026-11-24 13:45:01.123 cutecall INFO: compiled kernel 'vector_add' ...
FORMAT = "%(asctime)s.%(msecs)03d cutecall %(levelname)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure_from_env() -> None:
    """Prints the log to stderr at the level $CUTECALL_LOG names (once)."""
    value = os.environ.get(ENV, "").strip().lower()
    if not value or getattr(logger, "_cutecall_env_handler", None):
        return
    if value not in _LEVELS:
        warnings.warn(f"cutecall: {ENV}={os.environ[ENV]!r} is not a log level "
                      f"({', '.join(_LEVELS)}); ignored", RuntimeWarning, stacklevel=2)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT, datefmt=DATE_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(_LEVELS[value])
    logger._cutecall_env_handler = handler


def describe(spec) -> str:
    """A one-line summary of a specialization: per operand its dtype and
    extents (static values; ``?`` dynamic, with a divisibility class above 1
    as ``?%16``), and the number of runtime scalars."""
    parts = []
    for op in spec.operands:
        dims = ",".join(str(s) if s is not None else ("?" if d == 1 else f"?%{d}")
                        for s, d in zip(op.static_shape, op.divisibility))
        parts.append(f"{op.name}:{op.cutlass_dtype}[{dims}]")
    if spec.scalar_types:
        parts.append(f"{len(spec.scalar_types)} scalars")
    return " ".join(parts)


configure_from_env()
