"""``cutlass_call``'s ``input_output_aliases``: {input: output} over
top-level positions (ints) or pytree key paths, checked, and resolved to
flat (input leaf, output leaf) pairs of a call (with the output leaves a
path alias hides from the kernel)."""

from __future__ import annotations

from typing import Mapping

from .._driver import pytree



def check_aliases(aliases) -> tuple:
    if aliases is None:
        return ()
    if not isinstance(aliases, Mapping):
        raise TypeError("cutecall: input_output_aliases must be a dict "
                        f"{{input: output}}, got {aliases!r}")
    out = []
    for i, o in aliases.items():
        for side, v in (("input", i), ("output", o)):
            ok = (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or \
                (isinstance(v, tuple) and bool(v))
            if not ok:
                raise TypeError(f"cutecall: input_output_aliases {side} {v!r} "
                                "must be a non-negative int (a top-level "
                                "argument/output) or a jax.tree_util key path")
        out.append((i, o))
    if len({o for _, o in out}) != len(out):
        raise ValueError("cutecall: input_output_aliases maps two inputs to one "
                         f"output: {aliases!r}")
    return tuple(out)


def driver_path(path) -> tuple:
    """A key path in the driver's terms (``pytree.Key``): JAX key entries
    (``SequenceKey``, ``GetAttrKey``, ``DictKey``), ints (positions) and
    strings (fields) alike."""
    out = []
    for k in path:
        if isinstance(k, pytree.Key):
            out.append(k)
        elif isinstance(k, int):
            out.append(pytree.Key("index", k))
        elif isinstance(k, str):
            out.append(pytree.Key("attr", k))
        elif hasattr(k, "idx"):
            out.append(pytree.Key("index", k.idx))
        elif hasattr(k, "name"):
            out.append(pytree.Key("attr", k.name))
        elif hasattr(k, "key"):
            out.append(pytree.Key("key", k.key))
        else:
            raise TypeError(f"cutecall: {k!r} is not a key path entry")
    return tuple(out)


def _same(a: pytree.Key, b: pytree.Key) -> bool:
    """Keys equal, a field name matching a dict's string key too (a user
    writes ``"out"`` for either)."""
    return a.value == b.value and (a.kind == b.kind or {a.kind, b.kind} == {"attr", "key"})


def leaves_under(paths: list, prefix: tuple) -> list[int]:
    return [k for k, p in enumerate(paths) if len(p) >= len(prefix)
            and all(_same(a, b) for a, b in zip(p, prefix))]


def resolve_aliases(aliases, in_paths, out_paths, name):
    """Flat (input leaf, output leaf) pairs and the output leaves hidden from
    the kernel (path aliases; int aliases remove whole top-level outputs)."""
    pairs, hidden = [], set()
    for i, o in aliases:
        whole = isinstance(o, int)
        i, o = driver_path((i,) if isinstance(i, int) else i), \
            driver_path((o,) if whole else o)
        ins, outs = leaves_under(in_paths, i), leaves_under(out_paths, o)
        if not ins or not outs:
            side, p = ("input", i) if not ins else ("output", o)
            raise ValueError(f"cutecall: input_output_aliases {side} "
                             f"{pytree.keystr(p)} of '{name}' selects no array")
        if len(ins) != len(outs) or any(
                len(in_paths[a]) - len(i) != len(out_paths[b]) - len(o) or not all(
                    _same(x, y) for x, y in zip(in_paths[a][len(i):], out_paths[b][len(o):]))
                for a, b in zip(ins, outs)):
            raise ValueError(f"cutecall: input_output_aliases {pytree.keystr(i)} -> "
                             f"{pytree.keystr(o)} of '{name}': the input and output "
                             "pytrees differ")
        pairs += zip(ins, outs)
        if not whole:
            hidden.update(outs)
    return tuple(pairs), hidden
