"""Launcher signatures: which parameter is the stream, which are tensors,
runtime scalars and constexprs, and how one call binds to them.

Pure Python, no CuTe DSL import. Annotations are read by name (``CUstream``,
``Float32``, ``Constexpr``...) so string annotations and
``from __future__ import annotations`` work the same.

The rule a user chooses by: a value given to ``cutlass_call(...)`` is a
compile-time constant (constexpr); a value given to the call is a runtime
value: arrays become tensors, scalars become runtime scalars (one compile
serves every value).
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from typing import Any, Mapping, Sequence

import numpy as np

# CuTe DSL numeric types a launcher can take as a runtime scalar.
SCALAR_TYPES = ("Boolean", "Int8", "Int16", "Int32", "Int64", "Uint8",
                "Uint16", "Uint32", "Uint64", "Float32", "Float64")
_INT_RANGE = {"Int8": (-2**7, 2**7), "Int16": (-2**15, 2**15),
              "Int32": (-2**31, 2**31), "Int64": (-2**63, 2**63),
              "Uint8": (0, 2**8), "Uint16": (0, 2**16), "Uint32": (0, 2**32),
              "Uint64": (0, 2**64)}

STREAM, TENSOR, SCALAR, CONSTEXPR = "stream", "tensor", "scalar", "constexpr"
ORDERS = ("inputs_first", "outputs_first")


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    kind: str                   # STREAM, TENSOR, SCALAR or CONSTEXPR
    scalar_type: str | None     # for SCALAR: a SCALAR_TYPES entry
    has_default: bool
    keyword_only: bool


@dataclasses.dataclass(frozen=True)
class LauncherSignature:
    """What cutecall knows of a launcher's parameters. ``inspected`` is False
    when the signature could not be read or takes ``*args``: then the
    ``(stream, *inputs, *outputs, **constexprs)`` convention applies."""

    name: str
    params: tuple[Param, ...]       # positional parameters, in order
    keyword_only: tuple[Param, ...]
    var_keyword: bool
    inspected: bool

    def keyword_names(self) -> list[str]:
        return [p.name for p in self.params + self.keyword_only
                if p.kind != STREAM]

    def check_constexprs(self, names) -> None:
        if not self.inspected or self.var_keyword:
            return
        known = set(self.keyword_names())
        for k in names:
            if k not in known:
                raise TypeError(
                    f"cutecall: launcher '{self.name}' has no parameter {k!r}; "
                    f"its parameters are {', '.join(sorted(known)) or '(none)'}")


def _annotation_name(annotation) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1].strip()
    return getattr(annotation, "__name__", "") or type(annotation).__name__


def _classify(p: inspect.Parameter) -> Param:
    ann = _annotation_name(p.annotation)
    if ann == "CUstream" or (not ann and p.name == "stream"):
        kind, st = STREAM, None
    elif ann in SCALAR_TYPES:
        kind, st = SCALAR, ann
    elif ann.startswith("Constexpr"):
        kind, st = CONSTEXPR, None
    else:
        kind, st = TENSOR, None
    return Param(p.name, kind, st, p.default is not inspect.Parameter.empty,
                 p.kind == p.KEYWORD_ONLY)


def analyze(fn) -> LauncherSignature:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    target = inspect.unwrap(getattr(fn, "__wrapped__", fn))
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return LauncherSignature(name, (), (), True, False)
    params, kwonly, var_kw, var_pos = [], [], False, False
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            params.append(_classify(p))
        elif p.kind == p.KEYWORD_ONLY:
            kwonly.append(_classify(p))
        elif p.kind == p.VAR_KEYWORD:
            var_kw = True
        else:
            var_pos = True
    if var_pos:
        return LauncherSignature(name, (), tuple(kwonly), var_kw, False)
    streams = [p.name for p in params if p.kind == STREAM]
    if len(streams) > 1:
        raise TypeError(f"cutecall: launcher '{name}' has {len(streams)} stream "
                        f"parameters ({', '.join(streams)}); it takes one, "
                        "XLA's stream")
    return LauncherSignature(name, tuple(params), tuple(kwonly), var_kw, True)


# ---------------------------------------------------------------------------
# Runtime scalars

@dataclasses.dataclass(frozen=True)
class ScalarArg:
    """One runtime scalar of one call: its type and its 8 raw ABI bytes as an
    int64 (the ``scalars`` attribute of the custom call)."""

    name: str
    scalar_type: str
    bits: int


def is_scalar_value(x) -> bool:
    """A Python/numpy scalar, or a concrete 0-d array (not a tracer)."""
    if isinstance(x, (bool, numbers.Number, np.generic)):
        return True
    return False


def _python_value(x, what: str):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (bool, numbers.Number)):
        return x
    raise TypeError(f"cutecall: {what} must be a Python or NumPy scalar, got "
                    f"{type(x).__name__}: {x!r}")


def concrete_scalar(x, what: str):
    """`x` as a Python value if it is a scalar known on the host; raises a
    clear error for traced values, which a runtime scalar cannot be."""
    if is_scalar_value(x):
        return _python_value(x, what)
    import jax

    if isinstance(x, jax.core.Tracer):
        raise TypeError(
            f"cutecall: {what} is a traced JAX value ({x.aval}); a runtime "
            "scalar travels with the call as a host value, so it must be known "
            "when the call is traced. Pass a Python/NumPy scalar (or a concrete "
            "array), or pass the value as a shape-(1,) array operand and read it "
            "in the kernel.")
    if hasattr(x, "shape") and tuple(x.shape) in ((), (1,)) and hasattr(x, "item"):
        return x.item()
    raise TypeError(f"cutecall: {what} must be a scalar, got "
                    f"{type(x).__name__}: {x!r}")


def infer_scalar_type(value) -> str:
    """The runtime type of an unannotated scalar parameter."""
    if isinstance(value, (bool, np.bool_)):
        return "Boolean"
    if isinstance(value, (numbers.Integral, np.integer)):
        return "Int64"
    if isinstance(value, (numbers.Real, np.floating)):
        return "Float32"
    raise TypeError(f"cutecall: cannot pass {type(value).__name__} {value!r} "
                    "as a runtime scalar (bool, int and float are supported)")


def encode_scalar(name: str, scalar_type: str, value) -> ScalarArg:
    what = f"runtime scalar {name!r} ({scalar_type})"
    if scalar_type == "Boolean":
        if not isinstance(value, (bool, np.bool_, numbers.Integral)) or \
                int(value) not in (0, 1):
            raise TypeError(f"cutecall: {what} must be a bool, got {value!r}")
        return ScalarArg(name, scalar_type, int(bool(value)))
    if scalar_type in _INT_RANGE:
        if isinstance(value, (bool, np.bool_)) or \
                not isinstance(value, (numbers.Integral, np.integer)):
            raise TypeError(f"cutecall: {what} must be an int, got "
                            f"{type(value).__name__}: {value!r}")
        lo, hi = _INT_RANGE[scalar_type]
        v = int(value)
        if not lo <= v < hi:
            raise ValueError(f"cutecall: {what} = {v} is out of range "
                             f"[{lo}, {hi - 1}]")
        return ScalarArg(name, scalar_type, v - 2**64 if v >= 2**63 else v)
    if scalar_type in ("Float32", "Float64"):
        if not isinstance(value, (numbers.Real, np.floating, np.integer)):
            raise TypeError(f"cutecall: {what} must be a real number, got "
                            f"{type(value).__name__}: {value!r}")
        if scalar_type == "Float32":
            bits = int(np.array(value, dtype=np.float32).view(np.int32))
        else:
            bits = int(np.array(value, dtype=np.float64).view(np.int64))
        return ScalarArg(name, scalar_type, bits)
    raise TypeError(f"cutecall: {what}: unsupported scalar type; supported: "
                    f"{', '.join(SCALAR_TYPES)}")


# ---------------------------------------------------------------------------
# Binding one call

@dataclasses.dataclass(frozen=True)
class Binding:
    """How one call fills the launcher's positional parameters. Hashable: it
    is a static argument of the traced call (scalar values included, so each
    distinct value lowers its own custom call; the DSL compile is shared).

    ``slots[i]`` for positional parameter ``i``: ``("stream",)``,
    ``("in", k)`` (the call's k-th positional array argument),
    ``("out", j)`` (the j-th kernel output), ``("scalar", s)``, or
    ``("default",)`` (left to its default value).
    ``arrays[k]`` is the call's positional index of array argument k.
    """

    slots: tuple
    arrays: tuple
    scalars: tuple          # ScalarArg, in slot order
    keyword_scalars: tuple  # (param name, scalar index) for keyword-only


def bind(sig: LauncherSignature, args: Sequence[Any], kwargs: Mapping[str, Any],
         num_outputs: int, order: str, constexpr_names) -> tuple[Binding, list]:
    """Binds a call's arguments; returns the binding and the array arguments
    (pytrees, None allowed) in launcher order."""
    scalars: list[ScalarArg] = []
    if not sig.inspected:  # (stream, *inputs, *outputs, **constexprs)
        if kwargs:
            raise TypeError(f"cutecall: launcher '{sig.name}' takes *args, so "
                            f"call-time keyword arguments {sorted(kwargs)} cannot "
                            "be bound; pass them positionally")
        slots, arrays, array_args = [("stream",)], [], []
        for i, a in enumerate(args):
            if is_scalar_value(a):
                v = _python_value(a, f"argument {i}")
                scalars.append(encode_scalar(f"arg{i}", infer_scalar_type(v), v))
                slots.append(("scalar", len(scalars) - 1))
            else:
                slots.append(("in", len(arrays)))
                arrays.append(i)
                array_args.append(a)
        slots += [("out", j) for j in range(num_outputs)]
        return Binding(tuple(slots), tuple(arrays), tuple(scalars),
                       ()), array_args

    by_name = {p.name: p for p in sig.params + sig.keyword_only}
    for k in kwargs:
        p = by_name.get(k)
        if p is None or p.kind == STREAM:
            raise TypeError(f"cutecall: launcher '{sig.name}' has no parameter "
                            f"{k!r} to pass at call time; its parameters are "
                            f"{', '.join(sig.keyword_names())}")
        if k in constexpr_names:
            raise TypeError(f"cutecall: {k!r} of launcher '{sig.name}' was given "
                            "to cutlass_call(...) as a constexpr; it cannot also "
                            "be passed at call time")
    open_params = [i for i, p in enumerate(sig.params)
                   if p.kind in (TENSOR, SCALAR) and p.name not in kwargs
                   and p.name not in constexpr_names]
    # Outputs are the last (or first) array parameters without a default;
    # the call's positional arguments fill the remaining ones in order.
    out_candidates = [i for i in open_params
                      if sig.params[i].kind == TENSOR and not sig.params[i].has_default]
    n_args = len(args)
    if num_outputs > len(out_candidates):
        out_pos = None
    elif order == "outputs_first":
        out_pos = out_candidates[:num_outputs]
    else:
        out_pos = out_candidates[len(out_candidates) - num_outputs:]
    in_pos = [i for i in open_params if i not in (out_pos or ())]
    if out_pos is None or n_args > len(in_pos):
        names = [sig.params[i].name for i in open_params]
        raise TypeError(
            f"cutecall: launcher '{sig.name}' has {len(open_params)} parameters "
            f"for arrays and runtime scalars ({', '.join(names) or 'none'}), but "
            f"the call passes {n_args} positional argument(s) and "
            f"{num_outputs} output(s)")
    in_pos = in_pos[:n_args]

    slots: list = [None] * len(sig.params)
    arrays, array_args = [], []
    for i, p in enumerate(sig.params):
        if p.kind == STREAM:
            slots[i] = ("stream",)
    for j, i in enumerate(out_pos):
        slots[i] = ("out", j)

    def scalar(p: Param, value, what) -> tuple:
        v = concrete_scalar(value, what)
        st = p.scalar_type or infer_scalar_type(v)
        scalars.append(encode_scalar(p.name, st, v))
        return ("scalar", len(scalars) - 1)

    for k, i in enumerate(in_pos):
        p, a = sig.params[i], args[k]
        if p.kind == SCALAR or is_scalar_value(a):
            slots[i] = scalar(p, a, f"argument {p.name!r} of '{sig.name}'")
        else:
            slots[i] = ("in", len(arrays))
            arrays.append(k)
            array_args.append(a)
    keyword_scalars = []
    for k, v in kwargs.items():
        p = by_name[k]
        if p.kind == TENSOR and not is_scalar_value(v):
            raise TypeError(f"cutecall: array argument {k!r} of '{sig.name}' "
                            "must be passed positionally (keywords carry "
                            "runtime scalars only)")
        s = scalar(p, v, f"argument {k!r} of '{sig.name}'")
        if p.keyword_only:
            keyword_scalars.append((k, s[1]))
        else:
            slots[sig.params.index(p)] = s
    for i, p in enumerate(sig.params):
        if slots[i] is None:
            if p.name in constexpr_names or p.has_default:
                slots[i] = ("default",)
            else:
                raise TypeError(f"cutecall: launcher '{sig.name}' parameter "
                                f"{p.name!r} receives no value")
    for p in sig.keyword_only:
        if not p.has_default and p.name not in kwargs and \
                p.name not in constexpr_names:
            raise TypeError(f"cutecall: launcher '{sig.name}' needs keyword "
                            f"argument {p.name!r} (a constexpr to cutlass_call, "
                            "or a runtime scalar at call time)")
    return Binding(tuple(slots), tuple(arrays), tuple(scalars),
                   tuple(keyword_scalars)), array_args
