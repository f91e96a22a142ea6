"""Bundles: compiled kernels on disk for processes without the CuTe DSL
compiler, Python or pure C++ (``#include <cutecall/bundle.h>``).

``_write``: :func:`export` (and ``cutecall export``) writes a directory of
objects plus a manifest, atomically. ``_read``: :func:`load_bundle`, through
the C++ reader, verifies every digest before anything is loaded. Neither
imports a framework.
"""

from ._read import Bundle, BundleError, load_bundle
from ._write import export

__all__ = ["export", "load_bundle", "Bundle", "BundleError"]
