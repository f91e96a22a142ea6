"""Moved to :mod:`cutecall.quack.mlp`. This path works for one release and warns
(``DeprecationWarning``) when imported."""

import cutecall.quack.mlp as _new
from cutecall.quack.mlp import *  # noqa: F401,F403

from ._moved import moved

__all__ = list(getattr(_new, "__all__", ()))
__getattr__ = moved(__name__, _new)
