"""``cutlass.jax.testing`` as ``cutecall.testing``: NVIDIA's test helpers
(``create_tensor``, the GEMM layout helpers ``gemm_a_mode`` ..., reference
functions), so code written for ``cutlass.jax`` keeps working when its
import changes::

    import cutecall.testing as testing     # was: import cutlass.jax.testing
    x = testing.create_tensor((128, 64), jnp.float32, jax.random.key(0))

Every attribute is read from NVIDIA's module on first use; importing this
module imports nothing of the CuTe DSL. Reading an attribute without the
DSL raises ``ImportError`` saying so. The helpers are NVIDIA's (they hold
no cutecall logic); cutecall neither copies nor changes them.
"""

from __future__ import annotations

import importlib

_SOURCE = "cutlass.jax.testing"


def _source():
    try:
        return importlib.import_module(_SOURCE)
    except Exception as e:  # a broken install raises more than ImportError
        raise ImportError(f"cutecall.testing forwards to {_SOURCE}, which does "
                          f"not import here (install nvidia-cutlass-dsl): "
                          f"{type(e).__name__}: {e}") from e


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(_source(), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} "
                             f"({_SOURCE} has none either)") from None
    globals()[name] = value
    return value


def __dir__():
    names = set(globals())
    try:
        names |= {n for n in dir(_source()) if not n.startswith("_")}
    except ImportError:
        pass
    return sorted(names)
