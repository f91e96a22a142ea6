"""The process's store, as the environment selects it.

=================================  ============================================
variable                           meaning
=================================  ============================================
``CUTECALL_CACHE_DIR``             the local tier (default ~/.cache/cutecall)
``CUTECALL_CACHE=0``               no store at all (nor the remote tier)
``CUTECALL_CACHE_MAX_BYTES``       the local tier's bound (bytes, or K/M/G)
``CUTECALL_CACHE_REMOTE``          the remote tier's URL (``remote``)
``CUTECALL_CACHE_REMOTE_MODE``     ``readwrite`` (default) or ``read``
``CUTECALL_CACHE_SIGNING_KEY``     sign what is published; refuse the rest
``CUTECALL_CACHE_LEASE_S``         a compile lease's time to live (30)
``CUTECALL_CACHE_REMOTE_WAIT_S``   the longest wait for another's compile (900)
``CUTECALL_CACHE_REMOTE_TIMEOUT_S``  one remote call's timeout (10)
=================================  ============================================
"""

from __future__ import annotations

import os
import re
import warnings

from .entry import DEFAULT_MAX_BYTES
from .local import ArtifactStore
from .remote import check_url

__all__ = ["default_store", "parse_size", "remote_tier", "remote_settings", "signing_key"]

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


# -- the remote tier ------------------------------------------------------------
_remote: dict = {}  # settings -> RemoteTier or None (the one per process)


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"cutecall: {name}={text!r} is not a positive number of seconds")
    return value


def signing_key() -> bytes | None:
    """``CUTECALL_CACHE_SIGNING_KEY`` as bytes, None when unset. Set but
    empty (or blank) is a ValueError: an unset secret expanded into it
    (``"$(cat /missing)"``) must not quietly turn signing off."""
    key = os.environ.get("CUTECALL_CACHE_SIGNING_KEY")
    if key is None:
        return None
    if not key.strip():
        raise ValueError(f"cutecall: CUTECALL_CACHE_SIGNING_KEY={key!r} is empty: set the "
                         f"key (a secret of at least 16 bytes is good), or unset the "
                         f"variable to publish and accept unsigned entries")
    return key.encode()


def remote_settings() -> tuple | None:
    """(url, signing key, read only, lease ttl, wait bound, timeout) from the
    environment, or None when no remote tier is set. A bad value (a URL no
    backend can use: ``remote.check_url``) raises ValueError naming the
    variable and the value."""
    url = os.environ.get("CUTECALL_CACHE_REMOTE", "").strip()
    if not url:
        return None
    check_url(url)
    mode = os.environ.get("CUTECALL_CACHE_REMOTE_MODE", "readwrite").strip().lower()
    if mode not in ("read", "readwrite", "rw", ""):
        raise ValueError(f"cutecall: CUTECALL_CACHE_REMOTE_MODE={mode!r}: use read or "
                         f"readwrite")
    return (url, signing_key(), mode == "read",
            _seconds("CUTECALL_CACHE_LEASE_S", 30.0),
            _seconds("CUTECALL_CACHE_REMOTE_WAIT_S", 900.0),
            _seconds("CUTECALL_CACHE_REMOTE_TIMEOUT_S", 10.0))


def remote_tier():
    """The process's RemoteTier, or None (none set, or its client library
    is missing: then one RuntimeWarning says what to install)."""
    settings = remote_settings()
    if settings is None:
        return None
    if settings not in _remote:
        from .remote import open_backend
        from .remote_tier import RemoteTier
        url, key, read_only, ttl_s, bound_s, timeout_s = settings
        try:
            backend = open_backend(url, timeout_s)
        except ImportError as e:
            warnings.warn(f"cutecall: {e}; kernels compile locally", RuntimeWarning,
                          stacklevel=2)
            _remote[settings] = None
            return None
        _remote[settings] = RemoteTier(backend, signing_key=key, read_only=read_only,
                                       ttl_s=ttl_s, bound_s=bound_s)
    return _remote[settings]
