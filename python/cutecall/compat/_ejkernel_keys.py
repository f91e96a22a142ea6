"""Content keys of callables, for ejkernel's two APIs: the named call
cache of ``cute_call`` and ``CuteFFICall``'s own key. Two objects get equal
keys only if calling them behaves the same, so a name that misses a
parameter never hands back another kernel."""

from __future__ import annotations

import functools
import types

import jax
import numpy as np

from .._driver.fingerprint import IdentityKey

_MAX_DEPTH = 8
_MAX_ITEMS = 64


def content_key(obj, _depth: int = 0):
    """A hashable key equal for two objects only if calling them behaves the
    same: immutable values by value (floats bit-exact), tuples item by item,
    functions by module, code, globals, defaults and closure values,
    objects with a ``content_key()`` method (:class:`CuteFFICall`) by it;
    anything else (mutable containers included: a cached callable must act
    on the same objects) by identity."""
    if obj is None or isinstance(obj, (bool, int, str, bytes)):
        return (type(obj).__name__, obj)
    if isinstance(obj, float):
        return ("float", obj.hex())
    if isinstance(obj, np.generic):
        return ("np", obj.dtype.str, obj.tobytes())
    if isinstance(obj, np.dtype):
        return ("dtype", str(obj))
    if isinstance(obj, jax.ShapeDtypeStruct):
        return ("struct", tuple(str(d) for d in obj.shape), str(obj.dtype))
    if callable(getattr(type(obj), "content_key", None)):
        return obj.content_key()
    if _depth >= _MAX_DEPTH:
        return IdentityKey(obj)
    sub = functools.partial(content_key, _depth=_depth + 1)
    if type(obj) in (tuple, frozenset) and len(obj) <= _MAX_ITEMS:
        items = obj if type(obj) is tuple else sorted(obj, key=repr)
        return (type(obj).__name__,) + tuple(sub(v) for v in items)
    if isinstance(obj, types.FunctionType):
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(sub(cell.cell_contents))
            except ValueError:  # an empty cell
                cells.append(("empty-cell",))
        kwdefaults = sorted((obj.__kwdefaults__ or {}).items())
        return ("function", obj.__module__, obj.__qualname__, obj.__code__,
                IdentityKey(obj.__globals__), sub(obj.__defaults__),
                tuple((k, sub(v)) for k, v in kwdefaults), tuple(cells))
    if isinstance(obj, types.MethodType):
        return ("method", sub(obj.__self__), sub(obj.__func__))
    if isinstance(obj, functools.partial):
        return ("partial", sub(obj.func), sub(obj.args),  # keywords: its own copy
                tuple((k, sub(v)) for k, v in sorted(obj.keywords.items())))
    return IdentityKey(obj)


def arg_key(x):
    if isinstance(x, (jax.Array, jax.core.Tracer)) or (
            hasattr(x, "shape") and hasattr(x, "dtype")):
        return ("array", tuple(str(d) for d in x.shape), str(x.dtype),
                bool(getattr(getattr(x, "aval", None), "weak_type", False)))
    return content_key(x)
