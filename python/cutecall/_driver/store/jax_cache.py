"""Where JAX's own compile cache goes beside cutecall's remote tier (no
framework import here: ``cutecall.jax._cache`` sets JAX's config).

cutecall's tiers hold the CuTe DSL kernels; the XLA executable of the
program around them (the jitted step, its fusions, XLA's GEMM autotuning)
is compiled again by every fresh process unless JAX's persistent
compilation cache (``jax_compilation_cache_dir``) is shared too.
``share_jax_cache()`` points it at a directory beside the remote tier:

======================================  =======================================
``CUTECALL_CACHE_REMOTE``               JAX's cache directory
======================================  =======================================
``file:///shared/cutecall``             ``/shared/cutecall/jax``
``gs://bucket/cutecall`` (any bucket)   ``gs://bucket/cutecall/jax`` (JAX
                                        reads it through ``etils.epath``)
``redis://...``                         none: JAX's cache needs a filesystem
                                        or a bucket; one warning
unset                                   ``$CUTECALL_CACHE_DIR/jax`` (this host)
======================================  =======================================

``CUTECALL_CACHE_JAX=1`` does the same when ``cutecall.jax`` is imported
(``CUTECALL_CACHE_JAX=/path`` or ``=gs://...``: that directory; ``from_env``).

Example::

    from cutecall._driver.store import jax_cache
    jax_cache.jax_cache_dir("file:///shared/cutecall")   # -> '/shared/cutecall/jax'
"""

from __future__ import annotations

import os
import warnings
from urllib.parse import urlsplit

from .remote import REDIS_SCHEMES, file_url_path

__all__ = ["jax_cache_dir", "from_env"]

_ON = ("1", "true", "on", "yes")
_OFF = ("", "0", "false", "off", "no")
_warned: set = set()


def jax_cache_dir(location: str | None = None) -> str | None:
    """Where JAX's cache goes for `location` (a remote tier's URL, a bucket
    URL or a path; None: ``CUTECALL_CACHE_REMOTE``, else the local tier):
    the module docstring's table. None for a Redis URL (one warning)."""
    if location is None:
        location = os.environ.get("CUTECALL_CACHE_REMOTE", "").strip()
        if not location:
            from .config import default_store
            store = default_store()
            return os.path.join(store.root, "jax") if store is not None else None
    if not isinstance(location, str) or not location.strip():
        raise ValueError(f"cutecall: share_jax_cache(location={location!r}): expected a "
                         f"path or a URL (file:///shared/dir, gs://bucket/dir)")
    location = location.strip()
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme in REDIS_SCHEMES:
        if location not in _warned:
            _warned.add(location)
            warnings.warn(
                f"cutecall: JAX's compilation cache needs a filesystem path or a bucket "
                f"URL (file://, gs://, ...), not {scheme}:// ({_redacted(parts)}): XLA "
                f"compiles the program in every process. Set CUTECALL_CACHE_JAX to a "
                f"shared directory or bucket to share it", RuntimeWarning, stacklevel=3)
        return None
    if scheme == "file":
        return os.path.join(file_url_path(location, parts, "share_jax_cache(location)"), "jax")
    if len(scheme) > 1:              # gs://, s3://, ...: etils.epath reads them
        return location.rstrip("/") + "/jax"
    return os.path.abspath(os.path.expanduser(location))   # a path (C:\ too)


def from_env() -> tuple[bool, str | None]:
    """``CUTECALL_CACHE_JAX``: (False, None) unset or 0; (True, None) for 1
    (beside the remote tier); (True, value) for a path or URL."""
    value = os.environ.get("CUTECALL_CACHE_JAX", "").strip()
    if value.lower() in _OFF:
        return False, None
    return True, None if value.lower() in _ON else value


def _redacted(parts) -> str:
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"
