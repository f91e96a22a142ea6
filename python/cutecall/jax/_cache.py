"""``cutecall.share_jax_cache``: JAX's persistent compilation cache beside
cutecall's remote tier, so a cluster shares the XLA executables of its
programs (the jitted step around the kernels, XLA's GEMM autotuning baked
in) as it shares the kernels. Where the directory goes for each URL:
``_driver/store/jax_cache.py``; ``docs/cache.md`` (Clusters) says what it
costs.

Example::

    import cutecall
    cutecall.share_jax_cache("file:///tmp/cutecall-remote")   # -> '/tmp/cutecall-remote/jax'
"""

from __future__ import annotations

import jax

from .._driver.log import logger
from .._driver.store import jax_cache

__all__ = ["share_jax_cache", "share_from_env"]


def share_jax_cache(location: str | None = None, *, min_compile_time_s: float = 0.0
                    ) -> str | None:
    """Points JAX's persistent compilation cache (``jax_compilation_cache_dir``)
    beside cutecall's remote tier, so that a fresh process loads the XLA
    executable another process compiled: no XLA compile, no autotuning.
    JAX writes from process 0 of a ``jax.distributed`` job; every process
    reads.

    `location`: the remote tier's URL, a bucket URL or a path; None:
    ``CUTECALL_CACHE_REMOTE`` (``file:///shared/c`` -> ``/shared/c/jax``,
    ``gs://b/c`` -> ``gs://b/c/jax``), else ``$CUTECALL_CACHE_DIR/jax``.
    A Redis URL cannot hold JAX's cache: one warning, nothing set, None.
    Stores every executable that took at least `min_compile_time_s` to
    compile (JAX's own default is 1 s), whatever its size. A directory the
    program already set is kept and returned. Call it before the first
    compile you want cached.

    Example::

        import cutecall
        cutecall.share_jax_cache("file:///tmp/cutecall-remote")   # -> '/tmp/cutecall-remote/jax'
    """
    if isinstance(min_compile_time_s, bool) or not isinstance(
            min_compile_time_s, (int, float)) or min_compile_time_s < 0:
        raise ValueError(f"cutecall: share_jax_cache(min_compile_time_s="
                         f"{min_compile_time_s!r}): expected seconds >= 0")
    path = jax_cache.jax_cache_dir(location)
    if path is None:
        return None
    current = jax.config.jax_compilation_cache_dir
    if current and current != path:
        logger.info("JAX's compilation cache stays at %s (set by the program), not %s",
                    current, path)
        return current
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if "://" in path:   # XLA writes its per-fusion autotune cache to local paths only
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    _reset_if_opened_elsewhere(path)
    logger.info("JAX's compilation cache: %s", path)
    return path


def share_from_env() -> str | None:
    """``CUTECALL_CACHE_JAX`` (read when ``cutecall.jax`` is imported): unset
    or 0: nothing; 1: ``share_jax_cache()``; a path or URL: there."""
    on, location = jax_cache.from_env()
    return share_jax_cache(location) if on else None


def _reset_if_opened_elsewhere(path: str) -> None:
    """JAX opens its cache once, at the first compile with a directory set:
    one opened at another directory is dropped, so the next compile opens
    `path`."""
    try:
        from jax._src import compilation_cache as cc
    except ImportError:
        return
    opened = getattr(cc, "_cache", None)
    where = str(getattr(opened, "_path", "")) if opened is not None else ""
    if opened is not None and where.rstrip("/") != path.rstrip("/"):
        cc.reset_cache()
