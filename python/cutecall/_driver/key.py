"""The specialization key: one schema, built here and nowhere else.

A key is content, never identity: the launcher's fingerprint (source and
state, ``fingerprint``), every operand spec, the trees the arrays arrive in,
how the call binds to the launcher's parameters (slots, runtime scalar
types, keyword scalars), tied-dim symbols, constexprs, compile options, a
user's compile key, the target arch, the plan version and the versions of
cutecall and the DSL, and what the target device answers a kernel while it
is traced (``devices.DeviceProps.key``). It holds no dynamic extent: one compile serves every
shape of a specialization. No framework, no CuTe DSL.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, Sequence

from . import dsl, flavour as _flavour
from .fingerprint import value_fingerprint
from .plan import PLAN_VERSION


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """The versions every key and store entry carries."""
    from .._version import __version__
    return {"cutecall": __version__, "dsl": dsl.dsl_version(),
            "flavour": _flavour.name_or_none()}


def specialization_key(*, launcher: Any, operands: Sequence, trees: Sequence[str],
                       slots: Sequence, scalar_types: Sequence[str],
                       keyword_scalars: Sequence, symbols: Sequence[str],
                       constexprs: Sequence, compile_options: str, compile_key: Any,
                       arch: str, scalar_defaults: Sequence = (),
                       device: dict | None = None) -> str:
    """SHA-256 (hex) of the specialization's content. `launcher` is the
    launcher's fingerprint (taken once, when a front binds it: a kernel
    object's attributes may change while it is traced); `constexprs`
    ``(name, value)`` pairs; `compile_key` a fingerprint or None; `device`
    what the target device answers a kernel while traced
    (``DeviceProps.key``: SM count, shared memory, L2, max active
    clusters), so two SM counts are two keys."""
    doc = {
        "launcher": launcher,
        "operands": [op.key() for op in operands],
        "trees": list(trees),
        "binding": [[[s.kind.value, s.index] for s in slots], list(scalar_types),
                    [list(k) for k in keyword_scalars]],
        "symbols": list(symbols),
        "constexprs": [[k, value_fingerprint(v, f"constexpr {k!r}")]
                       for k, v in constexprs],
        "options": compile_options or "",
        "compile_key": compile_key,
        "arch": arch,
        "device": device,
        "versions": versions(),
        "plan": PLAN_VERSION,
    }
    if scalar_defaults:  # absent when empty: keys of other kernels unchanged
        doc["scalar_defaults"] = [list(d) for d in scalar_defaults]
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
