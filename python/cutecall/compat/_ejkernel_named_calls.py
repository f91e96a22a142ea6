"""The named call cache of ejkernel's ``cute_call``: a bounded LRU keyed on
the call's *content* (code, closure values, static parameters) as well as its
name, so a name that misses a parameter can never hand back another kernel
(ejkernel keys on the name alone)."""

from __future__ import annotations

import collections
import functools
import threading
import types

import jax
import numpy as np

_Tracer = jax.core.Tracer

# Content keys (the named call cache)

class _Identity:
    """Keys an object by identity and keeps it alive while keyed, so its id
    cannot be reused by another object."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj

    def __repr__(self):
        return f"_Identity({type(self.obj).__name__})"


_MAX_DEPTH = 8
_MAX_ITEMS = 64


def _content_key(obj, _depth: int = 0):
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
        return _Identity(obj)
    sub = functools.partial(_content_key, _depth=_depth + 1)
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
                _Identity(obj.__globals__), sub(obj.__defaults__),
                tuple((k, sub(v)) for k, v in kwdefaults), tuple(cells))
    if isinstance(obj, types.MethodType):
        return ("method", sub(obj.__self__), sub(obj.__func__))
    if isinstance(obj, functools.partial):
        return ("partial", sub(obj.func), sub(obj.args),  # keywords: its own copy
                tuple((k, sub(v)) for k, v in sorted(obj.keywords.items())))
    return _Identity(obj)


def _arg_key(x):
    if isinstance(x, (jax.Array, _Tracer)) or (
            hasattr(x, "shape") and hasattr(x, "dtype")):
        return ("array", tuple(str(d) for d in x.shape), str(x.dtype),
                bool(getattr(getattr(x, "aval", None), "weak_type", False)))
    return _content_key(x)


class _NamedCalls:
    """The named call cache: (name, content of `call`, argument and output
    contracts, device) -> the first callable seen with that key. A hit is a
    callable that behaves like the one passed (same content), with JAX's
    trace caches already warm. Bounded LRU, thread-safe."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.entries: collections.OrderedDict = collections.OrderedDict()
        self.lock = threading.Lock()

    def get_or_put(self, key, call_key, call):
        """The cached callable for `key` if its content is still `call_key`
        (a closure's cells can be rebound after it was cached), else `call`,
        which then takes the entry."""
        with self.lock:
            hit = self.entries.get(key)
            if hit is not None and _content_key(hit) == call_key:
                self.entries.move_to_end(key)
                return hit
            self.entries[key] = call
            self.entries.move_to_end(key)
            while len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
            return call

    def clear(self):
        with self.lock:
            self.entries.clear()


_NAMED_CALLS = _NamedCalls(256)
