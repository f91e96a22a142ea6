"""Moved to :mod:`cutecall.attention.kernels` (``dsl_arch`` to
:func:`cutecall.dsl_arch`). This path works for one release and warns
(``DeprecationWarning``) when imported."""

import cutecall.attention.kernels as _new
from cutecall.attention.kernels import *  # noqa: F401,F403

from ._moved import moved

__all__ = [*_new.__all__, "dsl_arch"]
__getattr__ = moved(__name__, _new)


def dsl_arch(arch: str = _new.ARCH):
    """:func:`cutecall.dsl_arch` with FA4's sm90 arch as default."""
    import cutecall
    return cutecall.dsl_arch(arch)
