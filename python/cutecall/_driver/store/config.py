"""The process's store, as the environment selects it.

``CUTECALL_CACHE_DIR`` (the local tier), ``CUTECALL_CACHE=0`` (no store),
``CUTECALL_CACHE_MAX_BYTES`` (bytes, or with a K/M/G suffix).
"""

from __future__ import annotations

import os
import re

from .entry import DEFAULT_MAX_BYTES
from .local import ArtifactStore

__all__ = ["default_store", "parse_size"]

_OFF = ("0", "false", "off", "no")
_ON = ("", "1", "true", "on", "yes")
_default: ArtifactStore | None = None


def parse_size(text: str, name: str = "CUTECALL_CACHE_MAX_BYTES") -> int:
    """'2147483648', '512M', '2G' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"cutecall: {name}={text!r} is not a size in bytes "
                         f"(e.g. 2147483648, 512M, 2G)")
    return int(m.group(1)) << (10 * " kmgt".index(m.group(2).lower() or " "))


def default_store() -> ArtifactStore | None:
    """The store the environment selects, or None when CUTECALL_CACHE=0."""
    global _default
    flag = os.environ.get("CUTECALL_CACHE", "1").strip().lower()
    if flag in _OFF:
        return None
    if flag not in _ON:
        raise ValueError(f"cutecall: CUTECALL_CACHE={flag!r}: use 1 or 0")
    root = os.environ.get("CUTECALL_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "cutecall")
    limit = os.environ.get("CUTECALL_CACHE_MAX_BYTES")
    max_bytes = parse_size(limit) if limit else DEFAULT_MAX_BYTES
    root = os.path.abspath(os.path.expanduser(root))
    if _default is None or (_default.root, _default.max_bytes) != (root, max_bytes):
        _default = ArtifactStore(root, max_bytes)
    return _default
