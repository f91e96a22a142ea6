"""Digests of source code, the part of a fingerprint that says which code
compiles: a function's source and its whole source file
(:func:`source_digest`), a class's source files and those of its bases
(:func:`class_digest`) -- the files that hold the kernels they launch.
``fingerprint`` puts them in its fingerprints. Pure Python, no CuTe DSL
import.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import textwrap


@functools.lru_cache(maxsize=256)
def class_digest(cls: type) -> str:
    """SHA-256 of the source files of a class and its bases (where the
    kernels it launches live)."""
    h = hashlib.sha256()
    for c in cls.__mro__:
        if c.__module__ == "builtins":
            continue
        h.update(f"{c.__module__}.{c.__qualname__}".encode())
        _hash_source_file(h, c)
    return h.hexdigest()


def _hash_source_file(h, obj) -> None:
    """Feeds `obj`'s whole source file to `h` (its path if unreadable)."""
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        path = None
    if path:
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(path.encode())


def source_digest(fn) -> str:
    """SHA-256 of the function's source and of its whole source file (which
    holds the kernels it launches)."""
    target = inspect.unwrap(getattr(fn, "__wrapped__", fn))
    h = hashlib.sha256()
    try:
        h.update(_strip_decorators(inspect.getsource(target)).encode())
    except (OSError, TypeError):
        pass
    _hash_source_file(h, target)
    return h.hexdigest()


def _strip_decorators(source: str) -> str:
    """Source without leading decorator lines: the DSL rewrites __wrapped__
    after the first compile and the rewritten function's source has none."""
    lines = textwrap.dedent(source).splitlines()
    while lines and lines[0].lstrip().startswith("@"):
        lines.pop(0)
    return "\n".join(lines)
