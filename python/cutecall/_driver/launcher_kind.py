"""What a launcher is: a ``@cute.jit`` function, a kernel object whose
``__call__`` is one, or a callable wrapping one -- anything else would
compile to an empty program whose outputs are never written.

A kernel object counts when its class defines a ``@cute.jit`` or
``@cute.kernel`` method (its ``__call__`` reaches it through ``self``). A
plain Python function counts as wrapping a launcher when it (or a plain
function it calls, a few levels deep) names a ``@cute.jit`` function, a
kernel object or a ``@cute.kernel`` (which it launches): a global, a closure
value or an attribute of a global module or object
(``kernels.vector_add(...)``).
Nothing here imports the CuTe DSL: the DSL marks what its decorators return
(``_decorator_kind``: ``"jit"`` or ``"kernel"``).

Example::

    from cutecall._driver import launcher_kind
    launcher_kind.check(vector_add)          # a @cute.jit function: fine
    launcher_kind.check(lambda a, b: None)   # TypeError naming it
"""

from __future__ import annotations

import functools
import inspect
import types

_DEPTH = 3  # how deep plain helpers are followed


def _marker(obj) -> str | None:
    """"jit" / "kernel" for what a DSL decorator returned, else None."""
    kind = getattr(obj, "_decorator_kind", None)
    return kind if isinstance(kind, str) else None


def _callees(obj) -> list:
    """What `obj` stands for when called: itself, what it wraps, its
    function (partials, bound methods) or its class's ``__call__``."""
    out = [obj]
    if isinstance(obj, functools.partial):
        out.append(obj.func)
    if inspect.ismethod(obj):
        out.append(obj.__func__)
    wrapped = getattr(obj, "__wrapped__", None)
    if wrapped is not None and wrapped is not obj:
        out.append(wrapped)
    if not isinstance(obj, (types.FunctionType, types.BuiltinFunctionType,
                            types.MethodType, functools.partial, type)):
        call = getattr(type(obj), "__call__", None)
        if call is not None:
            out.append(call)
    return out


def _named_objects(fn: types.FunctionType) -> list:
    """The objects `fn`'s code names: closure values, globals, and
    attributes (named in the code) of those."""
    names, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    roots = [c.cell_contents for c in (fn.__closure__ or ())
             if _has_contents(c)]
    roots += [fn.__globals__[n] for n in names if n in fn.__globals__]
    found = list(roots)
    for r in roots:
        for n in names:
            try:
                found.append(inspect.getattr_static(r, n))
            except AttributeError:
                continue
    return found


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _class_launches(fn) -> bool:
    """A kernel object (or a bound method of one) whose class defines a
    ``@cute.jit`` or ``@cute.kernel`` method: its plain ``__call__`` reaches
    them through ``self``, which no static reading of the code resolves."""
    owner = fn.__self__ if inspect.ismethod(fn) else fn
    if isinstance(owner, (types.FunctionType, types.BuiltinFunctionType,
                          functools.partial, type)):
        return False
    return any(_marker(m) is not None
               for cls in type(owner).__mro__ for m in vars(cls).values())


def kind(fn, depth: int = _DEPTH, seen: set | None = None) -> str:
    """"jit" when calling `fn` runs a ``@cute.jit`` function (directly,
    wrapped or through a kernel object) or launches a ``@cute.kernel``;
    "kernel" when it is a bare ``@cute.kernel``; "plain" otherwise."""
    seen = set() if seen is None else seen
    if _class_launches(fn):
        return "jit"
    plain = []
    for c in _callees(fn):
        if id(c) in seen:
            continue
        seen.add(id(c))
        m = _marker(c)
        if m is not None:
            return m
        if isinstance(c, types.FunctionType):
            plain.append(c)
    if depth > 0:
        for f in plain:
            for obj in _named_objects(f):
                if id(obj) in seen or not callable(obj):
                    continue
                if kind(obj, depth - 1, seen) in ("jit", "kernel"):
                    return "jit"  # calls a launcher, or launches a kernel
    return "plain"


def check(fn, name: str) -> None:
    """Raises a TypeError naming launcher `name` unless calling `fn` runs a
    ``@cute.jit`` function."""
    k = kind(fn)
    if k == "jit":
        return
    if k == "kernel":
        raise TypeError(
            f"cutecall: launcher '{name}' is a @cute.kernel (device code); pass "
            "the @cute.jit function that launches it (kernel(...).launch(grid=..., "
            "block=..., stream=...)).")
    raise TypeError(
        f"cutecall: launcher '{name}' ({fn!r}) is not a @cute.jit function, a kernel "
        "object whose __call__ is one, or a callable wrapping one: compiled, it "
        "would launch nothing and leave its outputs unwritten. Decorate it with "
        "@cute.jit.")
