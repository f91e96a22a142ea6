"""The launch plan's integer encoding: the C++ ``abi.h`` contract
(``docs/abi.md``), version ``_core.PLAN_VERSION``. :func:`encode_plan`
writes it from operand specs; :func:`decode_plan` reads any version back
(bundles, tests). The C++ parser (``_core.KernelEntry``) validates.
No framework, no CuTe DSL."""

from __future__ import annotations

import numpy as np

from .. import _core

PLAN_VERSION = int(_core.PLAN_VERSION)
FLAG_SHAPE64, FLAG_STRIDED = 1, 2


def encode_plan(operands, num_args: int, num_rets: int,
                num_scalars: int = 0) -> np.ndarray:
    """The int64 launch plan of abi.h, version PLAN_VERSION (docs/abi.md)."""
    out = [PLAN_VERSION, num_args, num_rets, len(operands), num_scalars]
    for op in operands:
        flags = (FLAG_SHAPE64 if op.shape64 else 0) | \
                (FLAG_STRIDED if op.strided else 0)
        out += [op.source, op.index, op.rank, op.elem_bytes, op.align, flags]
        statics = [(d, v) for d, v in enumerate(op.static_shape) if v is not None]
        tie = op.tie or (-1,) * op.rank
        dyn = [(d, op.divisibility[d], tie[d])
               for d, v in enumerate(op.static_shape) if v is None]
        out.append(len(statics))
        for d, v in statics:
            out += [d, v]
        out.append(len(dyn))
        for entry in dyn:
            out += list(entry)
        stride_div = op.stride_div or (1,) * op.rank
        dyn_stride = [] if not op.strided else \
            [(d, stride_div[d]) for d, v in enumerate(op.static_stride)
             if v is None]
        out.append(len(dyn_stride))
        for d, v in dyn_stride:
            out += [d, v]
        # Version 3: static strides other than the unit stride (a strided
        # operand's dims named nowhere have stride 1).
        static_stride = [] if not op.strided else \
            [(d, v) for d, v in enumerate(op.static_stride)
             if v is not None and v != 1]
        out.append(len(static_stride))
        for d, v in static_stride:
            out += [d, v]
    return np.asarray(out, dtype=np.int64)


def decode_plan(plan) -> list[dict]:
    """The operands of an encoded plan (any version): per operand
    ``source, index, rank, elem_bytes, align, flags``, ``static`` [(dim,
    extent)], ``dynamic`` [(dim, divisibility, symbol)], ``dyn_stride``
    [(dim, divisibility)], ``static_stride`` [(dim, stride)]. The C++
    parser validates; this only reads (bundles' manifests, tests)."""
    version, pos, out = plan[0], 5, []
    for _ in range(plan[3]):
        op = dict(zip(("source", "index", "rank", "elem_bytes", "align",
                       "flags"), plan[pos:pos + 6]))
        pos += 6
        for field, width in (("static", 2), ("dynamic", 3 if version >= 2
                                               else 2), ("dyn_stride", 2),
                             ("static_stride", 2 if version >= 3 else 0)):
            if width == 0:
                op[field] = []
                continue
            n = plan[pos]
            op[field] = [tuple(plan[pos + 1 + width * j:pos + 1 + width * (j + 1)])
                         for j in range(n)]
            pos += 1 + width * n
        out.append(op)
    return out
