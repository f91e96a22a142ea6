"""A launch object's options, read against its launcher's parameters: the
parameters a call fills (:func:`open_params`), and ``outputs=`` (how many,
or their names), ``dims=`` (dim names per parameter) and ``static=`` (what
each parameter compiles in, as StaticMasks) checked and normalized, as
``cutecall.torch.kernel`` documents them. No framework is imported."""

from __future__ import annotations

from typing import Sequence

from .operand import EVERY_EXTENT, EVERYTHING, static_mask
from .outputs import candidates
from .pipeline import Launcher
from .signature import CONSTEXPR, SCALAR, TENSOR, Param


def open_params(launcher: Launcher, args: Sequence = ()) -> list[Param]:
    """The launcher's parameters a launch object's call fills, in order:
    its tensors and runtime scalars, and the ``Constexpr`` ones too when
    `args` pass their values (more arguments than the others take, or a
    value no tensor or scalar is: ``binding.bind``)."""
    given = {k for k, _ in launcher.constexprs}
    params = [p for p in launcher.sig.params
              if p.kind in (TENSOR, SCALAR) and p.name not in given]
    if len(args) > len(params) or any(candidates.arg_kind(a) == candidates.VALUE
                                      for a in args):
        params = [p for p in launcher.sig.params if p.name not in given and (
            p.kind in (TENSOR, SCALAR) or p.kind == CONSTEXPR and not p.keyword_only)]
    return params


def outputs_from_option(outputs) -> tuple[int, tuple | None]:
    """``outputs=``: (how many, their names or None)."""
    names = None
    if isinstance(outputs, (list, tuple)):
        names = tuple(outputs)
        if not all(isinstance(o, str) for o in names):
            raise TypeError(f"cutecall: outputs must be an int or parameter "
                            f"names, got {outputs!r}")
        outputs = len(names)
    if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 0:
        raise ValueError(f"cutecall: outputs must be an int >= 0 (how many "
                         f"tensor parameters the launcher writes) or their "
                         f"names, got {outputs!r}")
    return outputs, names


def dims_from_option(dims, params: Sequence[Param]) -> dict:
    """``dims=``: {parameter name: tuple of dim names}."""
    if dims is None:
        return {}
    if not isinstance(dims, dict):
        raise TypeError(f"cutecall: dims must be a dict {{parameter: (name or None "
                        f"per dim)}}, got {dims!r}")
    names = {p.name for p in params}
    out = {}
    for name, per_dim in dims.items():
        if name not in names:
            raise ValueError(f"cutecall: dims names {name!r}, which is not a "
                             f"parameter of the launcher ({sorted(names)})")
        if not isinstance(per_dim, (tuple, list)) or \
                any(d is not None and not isinstance(d, str) for d in per_dim):
            raise TypeError(f"cutecall: dims[{name!r}] must be a tuple of names "
                            f"(str) or None per dim, got {per_dim!r}")
        out[name] = tuple(per_dim)
    return out


def masks_from_option(static, params: Sequence[Param]) -> dict:
    """``static=`` as {parameter name: StaticMask}: True (every extent and
    stride of every tensor), or {parameter name: True | per-dim bools}
    (extents)."""
    if static is None or static is False:
        return {}
    if static is True:
        return {p.name: EVERYTHING for p in params}
    if not isinstance(static, dict):
        raise TypeError(f"cutecall: static must be True, False, None or a dict "
                        f"{{parameter: True | tuple of bools}}, got {static!r}")
    names = [p.name for p in params]
    masks = {}
    for name, dims in static.items():
        if name not in names:
            raise ValueError(f"cutecall: static names {name!r}, which is not a "
                             f"tensor parameter; parameters: {', '.join(names)}")
        if dims is True:
            masks[name] = EVERY_EXTENT
        elif isinstance(dims, (tuple, list)) and all(isinstance(x, bool) for x in dims):
            masks[name] = static_mask(dims)
        else:
            raise TypeError(f"cutecall: static[{name!r}] must be True or a "
                            f"tuple of bools per dim, got {dims!r}")
    return masks

