"""The output contract of ejkernel's ``cute_call``: as ejkernel documents
(its code does it for ``out``), the result is flattened and its leaves
unflattened into the contract's tree (``out``'s, else ``out_shape``'s), so
``call`` may return ``[y]`` for ``out={"r": y0}``. The leaves are checked
first: their count, each one's type, shape and dtype. An error names the
leaf by its key path, on both sides where the trees differ (e.g. "`out`['r']
vs `call`'s result[0]"), what was expected and what came back."""

from __future__ import annotations

from typing import Any

import jax

from ._ejkernel_ffi import shape_dtype

_keystr = jax.tree_util.keystr


def _is_array(x) -> bool:
    return isinstance(x, (jax.Array, jax.core.Tracer))


def _where(got_path: str, got_what: str, want_path: str, want_what: str) -> str:
    """The leaf: ``output<path>`` when both sides call it the same, else
    both paths (the trees differ)."""
    if got_path == want_path:
        return f"output{want_path}"
    return f"{want_what}{want_path} vs {got_what}{got_path}"


def _match(got, got_paths, got_what: str, want, want_paths, want_what: str):
    """Leaf count, then per leaf shape and dtype; errors name the leaf."""
    if len(got) != len(want):
        if len(got) < len(want):
            extra = ", ".join(f"{want_what}{p}" for p in want_paths[len(got):])
            detail = f"nothing for {extra}"
        else:
            extra = ", ".join(f"{got_what}{p}" for p in got_paths[len(want):])
            detail = f"{extra} beyond the contract"
        raise ValueError(f"Mismatch between number of output leaves: {got_what} "
                         f"has {len(got)}, {want_what} has {len(want)} "
                         f"({detail}).")
    for i, (g, w) in enumerate(zip(got, want)):
        for field in ("shape", "dtype"):
            if getattr(g, field) != getattr(w, field):
                where = _where(got_paths[i], got_what, want_paths[i], want_what)
                raise ValueError(
                    f"Output {field} mismatch at index {i} ({where}): "
                    f"{got_what} has {field} {getattr(g, field)}, expected "
                    f"{getattr(w, field)} from {want_what}.")


class OutputContract:
    """The outputs ``call`` must return: a (shape, dtype) per leaf, and the
    tree (``out``'s, else ``out_shape``'s) the leaves are returned in."""

    def __init__(self, out_shape: Any, out: Any):
        if out_shape is None and out is None:
            raise ValueError("Provide either `out` or `out_shape` to `cute_call`.")
        if out_shape is not None:
            leaves, tree = jax.tree_util.tree_flatten_with_path(out_shape)
            if not leaves:
                raise ValueError(f"`out_shape` has no leaves: {out_shape!r}")
            self.specs = [shape_dtype(x, f"`out_shape` leaf {_keystr(p)}")
                          for p, x in leaves]
            self.paths = [_keystr(p) for p, _ in leaves]
            self.source, self.tree = "out_shape", tree
        if out is not None:
            leaves, tree = jax.tree_util.tree_flatten_with_path(out)
            if not leaves:
                raise ValueError("`out` must contain at least one output array.")
            for i, (p, x) in enumerate(leaves):
                if not _is_array(x):
                    raise TypeError(
                        "`out` leaves must be JAX arrays/tracers. Got type "
                        f"{type(x)!r} at output index {i} (out{_keystr(p)}).")
            specs = [jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)
                     for _, x in leaves]
            paths = [_keystr(p) for p, _ in leaves]
            if out_shape is not None:
                _match(specs, paths, "`out`", self.specs, self.paths,
                       "`out_shape`")
            self.specs, self.paths = specs, paths
            self.source, self.tree = "out", tree

    def key(self) -> tuple:
        """Hashable content: the tree and every leaf's shape and dtype."""
        return (str(self.tree),) + tuple(
            (tuple(str(d) for d in s.shape), str(s.dtype)) for s in self.specs)

    def check(self, result: Any) -> Any:
        """`result`'s leaves, checked, in the contract's tree."""
        if result is None:
            raise ValueError("`cute_call` expected `call` to return output arrays. "
                             "Pass a primitive-backed callable instead of a "
                             "runtime launch object.")
        leaves = jax.tree_util.tree_flatten_with_path(result)[0]
        paths = [_keystr(p) for p, _ in leaves]
        for i, ((_, x), p) in enumerate(zip(leaves, paths)):
            if not _is_array(x):
                raise TypeError(f"`call` returned a non-array at output index {i} "
                                f"(output{p}): {type(x).__name__}: {x!r}")
        values = [x for _, x in leaves]
        _match([jax.ShapeDtypeStruct(tuple(x.shape), x.dtype) for x in values],
               paths, "`call`'s result", self.specs, self.paths,
               f"`{self.source}`")
        return jax.tree.unflatten(self.tree, values)
