"""The old paths of modules that moved out of ``cutecall.examples``.

Each old module (``cutecall.examples.flash_attention`` and the like) is a
shim kept for one release: it re-exports the new module's public names,
finds any other name there too, and warns once, when first imported::

    from cutecall.attention import jvp as _new
    from cutecall.attention.jvp import *  # noqa: F401,F403
    from ._moved import moved

    __all__ = _new.__all__
    __getattr__ = moved(__name__, _new)
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any, Callable


def moved(old: str, new: ModuleType) -> Callable[[str], Any]:
    """Warns (``DeprecationWarning``, attributed to the importing line) that
    module `old` is now `new`, and returns the shim's module
    ``__getattr__``: names the shim does not define are `new`'s."""
    warnings.warn(f"{old} moved to {new.__name__}; import it from there "
                  f"(the old path goes away in the next release)",
                  DeprecationWarning, stacklevel=3)

    def __getattr__(name: str) -> Any:
        try:
            return getattr(new, name)
        except AttributeError:
            raise AttributeError(f"module {old!r} (now {new.__name__!r}) has no "
                                 f"attribute {name!r}") from None
    return __getattr__
