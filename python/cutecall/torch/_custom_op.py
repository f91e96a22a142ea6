"""``torch.compile`` support of launch objects: a ``torch.library`` custom
op per :class:`~cutecall.torch.Kernel` that the compiler traces through.
The real implementation is the C++ launch; the fake one allocates (the
functional form, with ``allocate``) or does nothing (outputs mutated in
place). Eager calls never go through it."""

from __future__ import annotations

import itertools
import re
import weakref

import torch

from .._driver import signature as _signature

_op_ids = itertools.count()
_SCHEMA_SCALAR = {"Boolean": "bool", "Float32": "float", "Float64": "float"}


def custom_op(k):
    """The op of launch object `k` (held weakly: torch's op registry must
    not keep `k` alive)."""
    types = []
    for p in k.params:
        t = "Tensor" if p.kind == _signature.TENSOR else \
            _SCHEMA_SCALAR.get(p.scalar_type, "int")
        types.append(t)
    this = weakref.ref(k)

    def launch(*args):
        this().launch(*args)

    def allocate_and_launch(*args):
        return this()._allocate_and_launch(args)

    base = re.sub(r"\W", "_", k.name)
    qualname = f"cutecall::{base}_{next(_op_ids)}"
    if k.allocate is None:
        letters = iter("abcdefghijklmnopqrstuvwxyz")
        args = [f"{t}({next(letters)}!) {p.name}"
                if p.name in k.output_params else f"{t} {p.name}"
                for p, t in zip(k.params, types)]
        schema = f"({', '.join(args)}) -> ()"
        op = torch.library.custom_op(
            qualname, launch, mutates_args=tuple(k.output_params),
            schema=schema)
        op.register_fake(lambda *args: None)
        return op
    ins = [(p, t) for p, t in zip(k.params, types)
           if p.name not in k.output_params]
    rets = "Tensor" if k.num_outputs == 1 else \
        "(" + ", ".join(["Tensor"] * k.num_outputs) + ")"
    schema = f"({', '.join(f'{t} {p.name}' for p, t in ins)}) -> {rets}"
    op = torch.library.custom_op(qualname, allocate_and_launch,
                                 mutates_args=(), schema=schema)
    op.register_fake(k.allocate)
    return op
