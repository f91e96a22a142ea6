"""The JAX front's description step: what a ``cutlass_call`` is told about
its arrays -- specs per array (one for all, a flat list, or a pytree
mirroring the arguments), input/output aliases over top-level positions or
pytree key paths -- turned into the driver's operand descriptions; runtime
scalars read as host values; XLA layouts of compiled operands."""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from typing import Mapping

import jax
import numpy as np

from .._driver import call_checks, operand as _operand, pytree, signature as _signature
from .._driver.binding import Slot, SlotKind, check_argument
from .._driver.operand import SOURCE_ARG, SOURCE_RET
from .._driver.tensor_spec import TensorSpec

# ---------------------------------------------------------------------------
# Specs: a TensorSpec for all arrays, a flat list, or a pytree mirroring them

def is_spec_leaf(x) -> bool:
    if x is None or isinstance(x, TensorSpec):
        return True
    # NVIDIA's legacy shorthand: a bare int sequence is TensorSpec(mode=...).
    return isinstance(x, (list, tuple)) and bool(x) and \
        all(isinstance(i, int) for i in x)


def spec_leaf(x, what: str):
    if x is None or isinstance(x, TensorSpec):
        return x
    if isinstance(x, (list, tuple)):
        return TensorSpec(mode=tuple(x))
    raise TypeError(f"cutecall: {what} entries must be cutecall.TensorSpec, None "
                    f"or a mode tuple, got {type(x).__name__}: {x!r}")


def flat_specs(spec, present: list[bool], what: str, names: list[str] = ()) -> list:
    """One spec (or None) per present array, from `spec` that is None, one
    TensorSpec for all, ``{operand name: TensorSpec}`` (names as errors
    show them: ``"epilogue_args.mC"``), or a sequence/pytree with one entry
    per array -- either per present array or mirroring absent (None) ones
    too. `names`: the present arrays' operand names."""
    n = sum(present)
    if spec is None or isinstance(spec, TensorSpec):
        return [spec] * n
    if isinstance(spec, Mapping):
        unknown = [k for k in spec if k not in names]
        if unknown:
            raise ValueError(f"cutecall: {what} names {unknown}, which are not array "
                             f"operands of the call; those are {list(names)}")
        return [spec_leaf(spec.get(nm), what) for nm in names]
    leaves = [spec_leaf(x, what)
              for x in jax.tree.leaves(spec, is_leaf=is_spec_leaf)]
    if len(leaves) == n:
        return leaves
    if len(leaves) == len(present):
        for p, s in zip(present, leaves):
            if not p and s is not None:
                raise ValueError(f"cutecall: {what} gives {s!r} for an absent "
                                 "(None) array; an absent array takes None")
        return [s for p, s in zip(present, leaves) if p]
    raise ValueError(f"cutecall: {what} has {len(leaves)} entries for {n} arrays: "
                     f"{spec!r}")


def deprecated_mode(spec, mode, what: str):
    if mode is None:
        return spec
    if spec is not None:
        raise ValueError(f"cutecall: {what}_spec and {what}_mode cannot both be "
                         f"set; {what}_mode is deprecated, use {what}_spec")
    warnings.warn(f"cutecall: {what}_mode is deprecated; use "
                  f"{what}_spec=cutecall.TensorSpec(mode=...)",
                  DeprecationWarning, stacklevel=3)
    return mode


# ---------------------------------------------------------------------------
# Aliases: {input: output} over top-level positions (ints) or leaves (paths)

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


# ---------------------------------------------------------------------------
# Descriptions

def describe(name: str, source: int, index: int, x, spec, static_default: bool,
             kernel: str) -> _operand.OperandDesc:
    """The operand description of array (or ``ShapeDtypeStruct``) `x` under
    `spec` (a TensorSpec or None); `static_default`: use_static_tensors."""
    who = _operand.who(kernel, source, name)
    spec = spec or TensorSpec(static=static_default or None)
    if not isinstance(spec, TensorSpec):
        raise TypeError(f"{who}: its spec must be a cutecall.TensorSpec, got "
                        f"{type(spec).__name__}: {spec!r}")
    rank = len(x.shape)
    static = _operand.per_dim(static_default if spec.static is None else spec.static,
                              rank, f"{who}: static", False)
    return _operand.OperandDesc(
        name=name, source=source, index=index, dtype=x.dtype, shape=tuple(x.shape),
        order=spec.layout, mode=spec.mode, align=spec.ptr_assumed_align,
        extent_div=spec.divisibility, static=_operand.static_mask(static),
        dims=spec.dims)


def describe_operands(call, flat_in, binding, out_structs, out_paths, aliased,
                      top, unpassed) -> list:
    """The description step of CutlassCall `call`: an OperandDesc per input
    array leaf, then per output leaf the kernel writes (`aliased` ones
    excluded), named after the launcher parameter it binds to plus its key
    path (``epilogue_args.mC``); `unpassed`: the top-level outputs the
    launcher does not receive."""
    param_of = call.launcher.parameter_names(binding)
    names = leaf_names(call, binding)
    trees = dict(zip(binding.arrays, binding.trees))
    present = []
    for k in sorted(binding.arrays + binding.absent):
        present += [False] if k not in trees else [
            leaf.kind == pytree.ARRAY for leaf in _leaves(trees[k])
            if leaf.kind in (pytree.ARRAY, pytree.NONE)]
    in_specs = flat_specs(call.input_spec, present, "input_spec", names)
    kept = [j for j in range(top) if j not in unpassed]
    out_names = []
    for b in range(len(out_structs)):
        j = out_paths[b][0].value
        nm = param_of.get(Slot(SlotKind.OUTPUT, kept.index(j)), f"output{j}") \
            if j in kept else f"output{j}"
        out_names.append(nm + pytree.keystr(out_paths[b][1:]))
    out_specs = flat_specs(call.output_spec, [True] * len(out_structs), "output_spec",
                           out_names)
    out = [describe(nm, SOURCE_ARG, k, x, s, call.use_static_tensors, call.name)
           for k, (nm, x, s) in enumerate(zip(names, flat_in, in_specs))]
    out += [describe(out_names[b], SOURCE_RET, b, out_structs[b], out_specs[b],
                     call.use_static_tensors, call.name)
            for b in range(len(out_structs)) if b not in aliased]
    return out


def leaf_names(call, binding) -> list[str]:
    """Per input array leaf of a bound call, its name: the launcher
    parameter it reaches plus its key path (``epilogue_args.mC``)."""
    param_of = call.launcher.parameter_names(binding)
    arg_names = [param_of.get(Slot(SlotKind.INPUT, a), f"input{k}")
                 for a, k in enumerate(binding.arrays)]
    return [arg_names[a] + pytree.keystr(path) for a, path in binding.leaves]


def _leaves(tree):
    return tree.leaves() if isinstance(tree, pytree.Node) else (tree,)


def output_tree(kernel_positional) -> pytree.Node:
    """The driver's tree of the kernel's outputs (``ShapeDtypeStruct``
    leaves; hidden ones None)."""
    def no_scalars(path, value, scalar_type):
        raise TypeError(f"cutecall: output_shape_dtype{pytree.keystr(path)} is a "
                        f"scalar ({value!r}); outputs are arrays")
    return pytree.flatten(tuple(kernel_positional), is_array, no_scalars)[0]


def is_array(x) -> bool:
    """What the JAX front passes as a kernel tensor: a JAX array or tracer,
    a ``ShapeDtypeStruct``, a NumPy array."""
    return isinstance(x, (jax.Array, jax.core.Tracer, jax.ShapeDtypeStruct, np.ndarray)) \
        or (hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "aval"))


def xla_layout(op) -> tuple[int, ...]:
    """XLA minor-to-major for a compiled operand's CuTe stride order."""
    return tuple(sorted(range(op.rank), key=lambda d: op.order[d]))


def scalar_value(x, what: str):
    """A runtime scalar argument as a host value: a traced value has none,
    and the error says what to do instead."""
    if isinstance(x, jax.core.Tracer):
        raise TypeError(
            f"cutecall: {what} is a traced JAX value ({x.aval}); a runtime "
            "scalar travels with the call as a host value, so it must be known "
            "when the call is traced. Pass a Python/NumPy scalar (or a concrete "
            "array), or pass the value as a shape-(1,) array operand and read it "
            "in the kernel.")
    return _signature.concrete_scalar(x, what)


def check_output_params(output_params):
    """``cutlass_call(output_params=...)``: None or a tuple of names."""
    if output_params is None:
        return None
    if isinstance(output_params, str) or not all(isinstance(n, str) for n in output_params):
        raise TypeError(f"cutecall: output_params must be a sequence of parameter "
                        f"names, got {output_params!r}")
    return tuple(output_params)


# ---------------------------------------------------------------------------
# The call's arguments, named when they are what is wrong

def check_call_argument(x, what: str) -> None:
    """A positional argument of a call is something the JAX front takes:
    a torch tensor says how to make a JAX array of it."""
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "shape"):
        raise TypeError(
            f"cutecall: {what} is a torch tensor {call_checks.show(x)}; cutlass_call "
            "takes JAX arrays: pass jax.dlpack.from_dlpack(x) (the same memory) or "
            "jnp.asarray(x.cpu().numpy()), or launch it with cutecall.torch.kernel")
    check_argument(x, what, is_array)


def raise_if_unfit(call, args, kwargs, error: Exception) -> None:
    """`call`'s ``output_shape_dtype`` raised `error` on the call's
    arguments (the README's ``lambda a, b: ShapeDtypeStruct(a.shape, ...)``
    given a float): when no binding of the launcher fits the arguments
    either, that is the error to show, naming the argument."""
    try:
        launcher = call.launcher
        message = call_checks.explain_any_outputs(
            launcher.sig, args, kwargs, {k for k, _ in launcher.constexprs},
            call.operand_order)
    except Exception:  # the launcher cannot tell: the original error stands
        return
    if message is not None:
        raise TypeError(f"{message}; output_shape_dtype raised "
                        f"{type(error).__name__}: {error}") from error


def check_counts(call, args, kwargs, num_outputs: int) -> None:
    """The call's positional arguments and ``output_shape_dtype``'s
    `num_outputs` outputs fit the launcher's parameters in number."""
    launcher = call.launcher
    call_checks.check_counts(launcher.sig, len(args), num_outputs, kwargs,
                             {k for k, _ in launcher.constexprs}, "output_shape_dtype")


GPU_PLATFORMS = ("gpu", "cuda")
_off_gpu = contextvars.ContextVar("cutecall_off_gpu", default=None)


@contextlib.contextmanager
def eager_platform(call, binding, arrays):
    """While a call is traced: what :func:`refuse_off_gpu` checks -- an
    eager call (no argument traced) whose arrays are on a CPU could only
    fail after compiling. Read only when the call is traced (a miss of its
    trace cache), so an eager call pays a context variable."""
    token = _off_gpu.set((call, binding, arrays))
    try:
        yield
    finally:
        _off_gpu.reset(token)


def refuse_off_gpu() -> None:
    """Raises, before a compile, for an eager call that cannot run, naming
    the array that puts it on a CPU, or the default device."""
    found = _off_gpu.get()
    reason = _off_gpu_reason(*found) if found is not None else None
    if reason is not None:
        raise NotImplementedError(reason)


def _off_gpu_reason(call, binding, arrays) -> str | None:
    if any(isinstance(x, jax.core.Tracer) for x in arrays):
        return None
    committed = [(k, x) for k, x in enumerate(arrays)
                 if isinstance(x, jax.Array) and getattr(x, "committed", False)]
    if committed:
        k, x = committed[0]
        platform = next(iter(x.devices())).platform
        where = f"argument {leaf_names(call, binding)[k]!r} is on {x.devices()}"
    else:
        default = jax.config.jax_default_device
        platform = getattr(default, "platform", default) or jax.default_backend()
        where = f"its arrays go to the default device, a {platform} device"
    if platform in GPU_PLATFORMS:
        return None
    return (f"cutecall: kernel '{call.name}' runs only on CUDA GPUs, but {where}. "
            "Put the inputs on a GPU (jax.device_put(x, jax.devices('gpu')[0])), or "
            "inspect the call without one: call.lower(*args) or "
            "jax.jit(f).trace(*args).lower(lowering_platforms=('cuda',)).")
