"""The authors' own objects: run a third-party compile function up to its
``cute.compile`` and keep what it would compile.

QuACK's and FA4's host code builds its kernel objects and argument
containers (``GemmCls.EpilogueArguments(...)``, ``TileSchedulerOptions``,
``VarlenArguments``, ``AuxData``) right before ``cute.compile(kernel,
*args)``. :func:`compile_args` runs such a function with ``cute.compile``
intercepted: it returns the kernel object and the arguments exactly as the
authors built them (fake tensors included) and compiles nothing. A corpus
case hands that kernel object to cutecall unchanged, and a test compares
the pytree :func:`structure` of the arguments cutecall's call passes with
the authors' (same container classes, ``None`` where they pass ``None``,
same dtypes and ranks, same compile-time values).

    from quack import gemm as qgemm
    captured = compile_args(qgemm._compile_gemm.__wrapped__, ...)  # no compile
    captured.kernel      # the GemmDefaultSm90 object, configured as QuACK does
    captured.args        # (mA, mB, mD, mC, epi_args, scheduler_args, ...)

:func:`compile_calls` keeps every ``cute.compile`` call a function makes
instead of stopping at the first.

Imports CuTe DSL when called, never at import.
"""

from __future__ import annotations

from typing import Any

from cutecall._driver.dsl import Captured, compile_args  # noqa: F401 (the corpus' names)


def _dtype_name(x) -> str:
    """The CuTe DSL name of a tensor's element type: a DSL tensor or fake
    tensor (``element_type``), a JAX array or ShapeDtypeStruct, a torch
    tensor."""
    et = getattr(x, "element_type", None)
    if et is not None:
        return getattr(et, "__name__", str(et))
    from cutecall._driver.dtypes import cutlass_dtype
    dtype = x.dtype
    if type(dtype).__module__.startswith("torch"):
        dtype = str(dtype).replace("torch.", "")
    return cutlass_dtype(dtype, "structure")[0]


def structure(x) -> Any:
    """A comparable description of an argument pytree: tensors as
    ``("tensor", dtype, rank)``, DSL numbers and pointers as
    ``("scalar", type)``, containers as ``(class name, {field:
    structure})``; ``None`` and other Python values as themselves. A Python
    number in a field annotated with a DSL type (QuACK's ``max_swizzle_size:
    Int32``) is a scalar of that type, as cutecall reads it."""
    return _structure(x, None)


def _structure(x, annotation) -> Any:
    from cutecall._driver import pytree
    from cutecall._driver.scalars import SCALAR_TYPES
    from cutecall._driver.signature import annotation_names
    if x is None:
        return None
    shape = getattr(x, "shape", None)
    if shape is not None and (hasattr(x, "element_type") or hasattr(x, "dtype")) \
            and not isinstance(x, (int, float)) and len(tuple(shape)) > 0:
        return ("tensor", _dtype_name(x), len(tuple(shape)))
    st = pytree.dsl_scalar_type(x)
    if st is not None:
        return ("scalar", st)
    if type(x).__name__ == "_Pointer" or "Pointer" in type(x).__name__:
        return ("scalar", "Pointer")
    if pytree.is_container(x):
        kind, cls, keys, children, notes = pytree._children(x)
        name = cls.__qualname__ if cls is not None else kind
        return (name, {k: _structure(c, n) for k, c, n in zip(keys, children, notes)})
    names = annotation_names(annotation) if annotation is not None else []
    annotated = next((n for n in names if n in SCALAR_TYPES), None)
    if annotated and not (names and names[0].startswith("Constexpr")) and \
            isinstance(x, (int, float)) and not isinstance(x, bool):
        return ("scalar", annotated)
    return x


def compile_calls(fn, *args, **kwargs) -> list:
    """Every ``cute.compile`` call ``fn(*args, **kwargs)`` makes, in order,
    as ``Captured(kernel, args, kwargs)``; each returns a no-op in place of
    a compiled kernel, so `fn` runs on past its first compile (FA4's
    backward compiles its preprocess, main kernel and postprocess in
    turn). For host code that does not launch what it compiled (FA4 in
    torch's fake mode); library caches that would keep the no-ops must be
    set aside by the caller. Compiles nothing."""
    import cutlass.cute as cute
    got = []

    def record(kernel, *a, **kw):
        got.append(Captured(kernel, a, kw))
        return lambda *_, **__: None

    original = cute.compile
    cute.compile = record
    try:
        fn(*args, **kwargs)
    finally:
        cute.compile = original
    return got
