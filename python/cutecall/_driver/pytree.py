"""Pytree arguments: a kernel argument may be a NamedTuple, tuple, list,
dict or dataclass, nested, whose leaves are arrays (tensors), runtime
scalars, ``None`` or compile-time Python values -- QuACK's
``EpilogueArguments`` and ``TileSchedulerOptions``, FA4's ``AuxData``.

The driver flattens them itself, the same way for every front and for
bundles: :func:`flatten` gives the leaves with their key paths and a
:class:`Node` tree that records each leaf's kind. A leaf is

* ``ARRAY`` -- what the front calls an array (a JAX array or tracer, a
  torch tensor): a kernel tensor operand, with its own layout
  specialization;
* ``SCALAR`` -- a runtime scalar: a CuTe DSL value (``cutlass.Int32(8)``),
  or a Python number in a field annotated with a DSL scalar type
  (``alpha: Float32 | cute.Tensor``). Its value travels with the call;
* ``NONE`` -- ``None`` (an absent optional);
* ``CONST`` -- anything else (``Constexpr`` fields, enums, Python numbers in
  unannotated places): compiled in, part of the specialization key.

Inside the generated wrapper :meth:`Node.rebuild` makes the authors' own
containers again (``cls._make`` for NamedTuples, the dataclass constructor)
from the kernel's tensors and scalars, so the kernel sees exactly what its
authors pass. No framework, no CuTe DSL import.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Iterator

from .scalars import SCALAR_TYPES
from .signature import annotation_names, namedtuple_class, type_hints

ARRAY, SCALAR, NONE, CONST = "array", "scalar", "none", "const"
_CONTAINERS = ("tuple", "list", "namedtuple", "dict", "dataclass")


@dataclasses.dataclass(frozen=True)
class Key:
    """One step of a key path: ``index`` (a sequence position), ``attr`` (a
    NamedTuple or dataclass field) or ``key`` (a dict key)."""

    kind: str
    value: Any

    def __str__(self):
        return f".{self.value}" if self.kind == "attr" else f"[{self.value!r}]"


def keystr(path) -> str:
    """``[0].epilogue.mC``-style text of a key path (as ``jax.tree_util.keystr``)."""
    return "".join(str(k) for k in path)


@dataclasses.dataclass(frozen=True)
class Leaf:
    kind: str                  # ARRAY, SCALAR, NONE or CONST
    value: Any = None          # CONST: the value; SCALAR: its index in the call
    scalar_type: str = ""      # SCALAR: the DSL type


@dataclasses.dataclass(frozen=True)
class Node:
    """A container: its kind, its class (NamedTuple, dataclass), the keys of
    its children (field names, dict keys) and the children (Node or Leaf).
    Hashable when its constants are."""

    kind: str
    cls: Any
    keys: tuple
    children: tuple

    def rebuild(self, tensors: Iterator, scalars) -> Any:
        """The container with each ARRAY leaf the next of `tensors`, each
        SCALAR leaf its entry of `scalars`, each CONST its value."""
        items = []
        for c in self.children:
            if isinstance(c, Node):
                items.append(c.rebuild(tensors, scalars))
            elif c.kind == ARRAY:
                items.append(next(tensors))
            elif c.kind == SCALAR:
                items.append(scalars[c.value])
            else:
                items.append(c.value)
        if self.kind == "tuple":
            return tuple(items)
        if self.kind == "list":
            return items
        if self.kind == "namedtuple":
            return self.cls._make(items)
        if self.kind == "dict":
            return dict(zip(self.keys, items))
        return self.cls(**dict(zip(self.keys, items)))

    def unflatten(self, tensors) -> Any:
        """For array-only trees (outputs): the container of `tensors`."""
        return self.rebuild(iter(tensors), ())

    def key(self, fingerprint: Callable) -> list:
        """JSON-able content for the specialization key (constants by
        `fingerprint`, classes by module and name)."""
        out = [self.kind, None if self.cls is None else
               f"{self.cls.__module__}.{self.cls.__qualname__}", [repr(k) for k in self.keys]]
        for k, c in zip(self.keys, self.children):
            if isinstance(c, Node):
                out.append(c.key(fingerprint))
            elif c.kind == CONST:
                out.append([CONST, fingerprint(c.value, f"compile-time field {k!r}")])
            else:
                out.append([c.kind, c.scalar_type])
        return out

    def leaves(self) -> Iterator[Leaf]:
        for c in self.children:
            yield from (c.leaves() if isinstance(c, Node) else (c,))

    def __str__(self):
        return f"Node({self.kind}, {len(self.children)} children)"


def is_container(x) -> bool:
    return isinstance(x, (tuple, list, dict)) or (
        dataclasses.is_dataclass(x) and not isinstance(x, type))


def _children(x) -> tuple[str, Any, tuple, list, list]:
    """(kind, class, keys, children, annotation per child)."""
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        cls = type(x)
        notes = type_hints(cls) or getattr(cls, "__annotations__", {})
        return ("namedtuple", cls, tuple(cls._fields), list(x),
                [notes.get(f) for f in cls._fields])
    if isinstance(x, (tuple, list)):
        return ("tuple" if isinstance(x, tuple) else "list", None,
                tuple(range(len(x))), list(x), [None] * len(x))
    if isinstance(x, dict):  # insertion order (the key holds the order)
        keys = tuple(x)
        return "dict", None, keys, [x[k] for k in keys], [None] * len(keys)
    fields = [f for f in dataclasses.fields(x) if f.init]
    return ("dataclass", type(x), tuple(f.name for f in fields),
            [getattr(x, f.name) for f in fields], [f.type for f in fields])


def item_annotations(annotation, n: int) -> list | None:
    """The annotation of each of a tuple's `n` items under the tuple's own
    annotation: cuDNN's ``problem_shape: Tuple[Int32, Int32, Int32,
    Tuple[Int32, Int32]]`` passed ``(sq, sk, d, (h, b))`` makes each int a
    runtime ``Int32``, as the DSL reads it (``Tuple[Int32, ...]`` repeats
    one; ``Optional[...]`` is looked through). ``None`` when it says
    nothing."""
    if annotation is None or isinstance(annotation, str):
        return None
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return item_annotations(inner[0], n) if len(inner) == 1 else None
    if typing.get_origin(annotation) not in (tuple, list) or not args:
        return None
    if len(args) == 2 and args[1] is Ellipsis or typing.get_origin(annotation) is list:
        return [args[0]] * n
    return list(args) if len(args) == n else None


def as_annotated(x, annotation):
    """A plain tuple or list where the annotation names a NamedTuple class
    (FA4's ``blocksparse_tensors: Optional[BlockSparseTensors]``, which its
    authors pass as a tuple and the DSL accepts): that NamedTuple, missing
    trailing fields at their defaults, so the kernel reads it by field name.
    Anything else: `x`."""
    cls = namedtuple_class(annotation) if type(x) in (tuple, list) else None
    if cls is None or len(x) > len(cls._fields):
        return x
    missing = cls._fields[len(x):]
    if any(f not in cls._field_defaults for f in missing):
        return x
    return cls._make(list(x) + [cls._field_defaults[f] for f in missing])


def dsl_scalar_type(x) -> str | None:
    """The DSL type of a CuTe DSL numeric value (``cutlass.Int32(8)``)."""
    t = type(x)
    if t.__name__ in SCALAR_TYPES and t.__module__.startswith("cutlass"):
        return t.__name__
    return None


def classify(x, annotation, is_array: Callable[[Any], bool]) -> tuple[str, str]:
    """(kind, scalar type) of one leaf under its field's `annotation`."""
    if x is None:
        return NONE, ""
    names = annotation_names(annotation) if annotation is not None else []
    annotated = next((n for n in names if n in SCALAR_TYPES), None)
    if is_array(x) and not (annotated and tuple(getattr(x, "shape", (1,))) == ()):
        return ARRAY, ""  # (a 0-d array in a scalar field is that scalar)
    if names and names[0].startswith("Constexpr"):
        return CONST, ""
    st = dsl_scalar_type(x)
    if st is not None:
        return SCALAR, st
    if annotated:  # a runtime scalar (a value it cannot hold is an error)
        return SCALAR, annotated
    return CONST, ""


def flatten(x, is_array: Callable[[Any], bool], on_scalar: Callable,
            path: tuple = (), annotation=None) -> tuple[Node | Leaf, list]:
    """(tree, array leaves as (path, value)) of argument `x`. Each runtime
    scalar leaf is handed to ``on_scalar(path, value, scalar_type) -> index``
    (the call's scalar list), and the leaf records that index."""
    if not is_container(x) or is_array(x):
        kind, st = classify(x, annotation, is_array)
        if kind == ARRAY:
            return Leaf(ARRAY), [(path, x)]
        if kind == SCALAR:
            value = x.value if dsl_scalar_type(x) else x
            return Leaf(SCALAR, on_scalar(path, value, st), st), []
        return Leaf(kind, x if kind == CONST else None), []
    x = as_annotated(x, annotation)
    kind, cls, keys, values, notes = _children(x)
    if kind in ("tuple", "list"):
        notes = item_annotations(annotation, len(values)) or notes
    step = "index" if kind in ("tuple", "list") else "key" if kind == "dict" else "attr"
    children, arrays = [], []
    for k, v, note in zip(keys, values, notes):
        child, found = flatten(v, is_array, on_scalar, path + (Key(step, k),), note)
        children.append(child)
        arrays += found
    return Node(kind, cls, keys, tuple(children)), arrays
