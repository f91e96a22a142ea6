"""Content fingerprints of launchers and constexprs, for specialization keys.

A key is content, never identity: two launchers that compile to the same
kernel get the same fingerprint in every process, and two that do not, do
not. Functions count by their source (and their source file, which holds the
kernels they launch) and their closure; **kernel objects** -- QuACK's
``Softmax(dtype, N)``, FA4's ``FlashAttentionForwardSm90(...)``, any object
with a ``@cute.jit __call__`` -- by their class's source and every attribute
(``N``, tile sizes, ``is_causal``...), recursively. Values whose only
``repr`` holds an address are refused with a message naming them.

An object a compile fills in while traced (CUTLASS's GEMM objects set
their layouts, FA4's its copy atoms) keeps the fingerprint it had when
first seen (:func:`value_fingerprint`): launchers, constexprs and
compile-time arguments alike, so its second compile's key is its first's.

The digests of source code are ``source_digest``'s. :class:`IdentityKey`
keys a cache by identity where a value has no content to fingerprint.
Pure Python, no CuTe DSL import.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import inspect
import threading
import types
import weakref
from typing import Any

from .source_digest import class_digest, source_digest

_MAX_DEPTH = 16
_NONE = ["NoneType", None]  # the fingerprint of None


# A kernel object's fingerprint when a front end first bound it, the
# attributes it had then, and the states of those attributes that keep it.
# Tracing adds attributes (FA4's __call__ stores copy atoms and layouts;
# QuACK's sets cluster_n) and fills some it had (QuACK's sets
# b_smem_layout_staged, epi_tile, ...): derived state. So a later binding of
# the same object reuses the first fingerprint while the first attributes
# hold their first values or the values a compile of it left
# (:func:`remember_compiled_state`). Weak: the entry dies with the object.
_first_seen: "weakref.WeakKeyDictionary[Any, tuple[frozenset, Any, set]]" = \
    weakref.WeakKeyDictionary()
_first_seen_lock = threading.Lock()


def launcher_fingerprint(fn) -> Any:
    """The fingerprint of a launcher as a front end binds it
    (:func:`value_fingerprint`)."""
    return value_fingerprint(fn, "launcher")


def value_fingerprint(value, what: str) -> Any:
    """:func:`fingerprint` of a launcher, constexpr or compile-time
    argument, except that an object keeps the fingerprint of its state when
    first seen (see ``_first_seen``) while those attributes keep their
    first values or the values a compile of it left
    (:func:`remember_compiled_state`): a value, not an identity or a moment."""
    first = _first(value)
    if first is not None:
        return first
    fp = fingerprint(value, what)
    state = _state(value) if not inspect.isroutine(value) else None
    if state is not None:
        with contextlib.suppress(TypeError):  # not hashable or weak-referenceable
            with _first_seen_lock:
                _first_seen[value] = (frozenset(state), fp, {_digest(fp)})
    return fp


def _first(value) -> Any:
    """The fingerprint `value` was first seen with, while its first
    attributes hold first or compiled values; else None."""
    state = _state(value) if not inspect.isroutine(value) else None
    if state is None:
        return None
    try:
        with _first_seen_lock:
            first = _first_seen.get(value)
        if first is None:
            return None
        names, fp, states = first
        return fp if _first_state(value, state, names) in states else None
    except Exception:  # noqa: BLE001 - not hashable, or derived state that is not
        return None


def remember_compiled_state(value) -> None:
    """After a compile that `value` (a kernel or configuration object) took
    part in: the values its first attributes have now (what the trace
    filled in) keep its first fingerprint, so a front that binds it again
    finds the same kernel. A no-op for functions, objects never seen, and
    an object whose state cannot be fingerprinted (that costs a compile,
    nothing worse)."""
    state = _state(value) if not inspect.isroutine(value) else None
    if state is None:
        return
    try:
        with _first_seen_lock:
            first = _first_seen.get(value)
        if first is None:
            return
        now = _first_state(value, state, first[0])
    except Exception:  # noqa: BLE001 - derived state that does not hash
        return
    with _first_seen_lock:
        first[2].add(now)


def _first_state(fn, state: dict, names: frozenset) -> str:
    """The digest of the fingerprint of `fn`'s attributes `names` as they
    are now."""
    return _digest(_object_fingerprint(fn, {k: v for k, v in state.items() if k in names},
                                       "launcher", 0, frozenset()))


def _digest(fp) -> str:
    """A fingerprint (nested lists) as a hashable digest."""
    return hashlib.sha256(repr(fp).encode()).hexdigest()


def fingerprint(value, what: str) -> Any:
    """A JSON-able, address-free description of a constexpr or launcher.
    Constexprs must be hashable (the DSL caches on them); a kernel object's
    attributes may be any content (dicts included)."""
    return _fingerprint(value, what, 0, frozenset(), False)


def _fingerprint(value, what: str, depth: int, seen: frozenset,
                 in_object: bool) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return [type(value).__name__, value if not isinstance(value, float)
                else repr(value)]
    import numpy as np
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return [type(value).__name__, repr(value.item())]
    if depth > _MAX_DEPTH:
        raise TypeError(f"cutecall: {what} nests deeper than {_MAX_DEPTH} "
                        "levels; cannot fingerprint it")
    if id(value) in seen:
        return ["cycle"]
    seen = seen | {id(value)}
    inner = functools.partial(_fingerprint, depth=depth + 1, seen=seen,
                              in_object=in_object)
    if isinstance(value, (tuple, list)):
        return [type(value).__name__,
                [inner(v, f"{what}[{i}]") for i, v in enumerate(value)]]
    if isinstance(value, dict) and in_object:
        return ["dict", [[repr(k), inner(v, f"{what}[{k!r}]")]
                         for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))]]
    if isinstance(value, np.dtype):
        return ["dtype", value.name]
    if isinstance(value, enum.Enum):
        return ["enum", type(value).__module__, type(value).__qualname__,
                value.name]
    if isinstance(value, type):
        return ["type", value.__module__, value.__qualname__]
    if isinstance(value, types.ModuleType):
        # A module a launcher closes over (``import cutlass`` inside the
        # function that defines it): its name; its code is not the kernel's.
        return ["module", value.__name__]
    if in_object and "._mlir" in type(value).__module__:
        # An IR value a traced kernel object kept (FA4 stores copy atoms and
        # layouts on itself while traced): trace state, derived from the
        # object's configuration, not part of it.
        return ["ir", type(value).__qualname__]
    if hasattr(value, "__array__") or hasattr(value, "aval"):
        raise TypeError(f"cutecall: {what} is an array ({type(value).__name__}); "
                        "constexprs must be Python values. Pass arrays as "
                        "positional operands.")
    if inspect.ismethod(value):
        return ["method", inner(value.__func__, f"{what}.__func__"),
                inner(value.__self__, f"{what}.__self__")]
    if isinstance(value, functools.partial):
        member = functools.partial(_fingerprint, depth=depth + 1, seen=seen,
                                   in_object=True)
        return ["partial", member(value.func, f"{what}.func"),
                member(value.args, f"{what}.args"),
                member(value.keywords, f"{what}.keywords")]
    if inspect.isroutine(value) or (callable(value) and
                                    hasattr(value, "__wrapped__")):
        return _callable_fingerprint(value, what, inner)
    state = _state(value)
    if state is not None:
        first = _first(value) if depth else None  # an object a compile filled in
        return first if first is not None else \
            _object_fingerprint(value, state, what, depth, seen)
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"cutecall: {what} = {value!r} is not hashable; "
                        "constexprs must be hashable Python values") from None
    r = repr(value)
    if " at 0x" in r:
        raise TypeError(f"cutecall: {what} = {r} has no stable repr; pass a "
                        "value whose repr does not contain an address")
    return ["repr", type(value).__module__, type(value).__qualname__, r]


def _callable_fingerprint(value, what: str, inner) -> list:
    """A function's module, name, source digest, closure values and
    parameter defaults (`inner` fingerprints each value one level deeper)."""
    target = inspect.unwrap(getattr(value, "__wrapped__", value))
    closure = []
    for cell in getattr(target, "__closure__", None) or ():
        try:
            closure.append(inner(cell.cell_contents, f"{what} closure"))
        except ValueError:
            closure.append(["empty-cell"])
    # Factory-made callables (FA4's score/mask mods) may capture their
    # values as parameter defaults instead of closure cells.
    kwdefaults = getattr(target, "__kwdefaults__", None)
    defaults = [inner(getattr(target, "__defaults__", None), f"{what} __defaults__"),
                inner(None if kwdefaults is None else tuple(sorted(kwdefaults.items())),
                      f"{what} __kwdefaults__")]
    return ["callable", getattr(target, "__module__", "?"),
            getattr(target, "__qualname__", type(target).__name__),
            source_digest(value), closure] + \
        ([["defaults", defaults]] if defaults != [_NONE, _NONE] else [])


def _object_fingerprint(value, state: dict, what: str, depth: int,
                        seen: frozenset) -> list:
    cls = type(value)
    member = functools.partial(_fingerprint, depth=depth + 1,
                               seen=seen | {id(value)}, in_object=True)
    return ["object", cls.__module__, cls.__qualname__, class_digest(cls),
            [[k, member(v, f"{what}.{k}")] for k, v in sorted(state.items())]]


def _state(value) -> dict | None:
    """An object's attributes (``__dict__`` and ``__slots__``), or None for
    objects that have neither (builtins)."""
    state = dict(getattr(value, "__dict__", None) or {})
    for cls in type(value).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") \
                    and hasattr(value, slot):
                state[slot] = getattr(value, slot)
    if not state and not hasattr(value, "__dict__"):
        return None
    return state


class IdentityKey:
    """A cache key for an object that is not hashable: by identity. It
    keeps the object alive while keyed, so its id cannot be reused by
    another object (a Helion kernel object, a closure's globals)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, IdentityKey) and other.obj is self.obj

    def __repr__(self):
        return f"IdentityKey({type(self.obj).__name__})"
