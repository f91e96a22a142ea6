"""ejkernel's CuTe call API, run by cutecall: a drop-in for

    from ejkernel.callib._cute_call import CAN_USE_CUTE, cute_call
    from ejkernel.callib._cute_ffi import build_cute_ffi_call, has_cute_ffi_support

Change those imports to ``from cutecall.ejkernel import ...`` and nothing
else. Kernels run through :func:`cutecall.cutlass_call` (cutecall's own XLA
FFI runtime: no TVM-FFI, no ``jax_tvm_ffi``). Where ejkernel has flaws this
module behaves better; ``docs/migrate/ejkernel.md`` lists every difference:

* the named call cache keys on the call's *content* (code, closure values,
  static parameters) as well as the name, so a name that misses a parameter
  can no longer hand back another kernel;
* ``jax.shard_map`` is detected from the abstract mesh of the trace (its
  manual axes), which works on current JAX (ejkernel's probe of private
  state silently fails there);
* the ``device=`` check raises (ejkernel's swallows its own AssertionError);
* the result is unflattened into ``out``'s (else ``out_shape``'s) tree, as
  documented, after a check of every leaf whose errors name the leaf (by
  key path), what was expected and what came back.

Owns one cache: the named call cache (bounded LRU, ``_NAMED_CALLS``).
"""

from __future__ import annotations

import collections
import functools
import inspect
import logging
import math
import re
import threading
import types
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

from . import _runtime, _signature
from ._api import cutlass_call
from ._ejkernel_contract import OutputContract, shape_dtype as _shape_dtype

__all__ = ["cute_call", "build_cute_ffi_call", "has_cute_ffi_support",
           "CuteFFICall"]

_log = logging.getLogger(__name__)
_Tracer = jax.core.Tracer


# ---------------------------------------------------------------------------
# Is the CuTe DSL usable? (checked lazily: importing cutecall never imports it)

@functools.cache
def _dsl_import_error() -> str | None:
    """None when the CuTe DSL imports, else why not."""
    try:
        import cutlass  # noqa: F401
        import cutlass.cute  # noqa: F401
    except Exception as e:  # a broken install raises more than ImportError
        return f"{type(e).__name__}: {e}"
    return None


def __getattr__(name: str):
    # ejkernel's module flags, computed on first use.
    if name in ("CAN_USE_CUTE", "CAN_USE_CUTE_PRIMITIVE"):
        return _dsl_import_error() is None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _support_error() -> str | None:
    if (err := _dsl_import_error()) is not None:
        return f"the CuTe DSL does not import ({err})"
    if _runtime.find_runtime_library() is None:
        return ("the CuTe DSL runtime library libcute_dsl_runtime.so was not "
                "found (install nvidia-cutlass-dsl-libs-cu13 or -cu12, or set "
                "$CUTECALL_DSL_RUNTIME)")
    try:
        _runtime.ensure_registered()
    except Exception as e:
        return f"cutecall's FFI targets could not be registered with JAX ({e})"
    return None


def has_cute_ffi_support() -> bool:
    """Whether :func:`build_cute_ffi_call` kernels can be compiled and lowered.

    True when all of these hold: the CuTe DSL (``cutlass``, ``cutlass.cute``)
    imports; the DSL runtime library ``libcute_dsl_runtime.so``, which runs
    the compiled kernels, is found; cutecall's FFI targets are registered
    with JAX. It needs no GPU, no ``jax_tvm_ffi`` and no ``tvm_ffi``: on a
    machine without a GPU, kernels compile (for ``$CUTECALL_ARCH``, default
    sm_90a) and lower for the ``cuda`` platform (``jax.export``, AOT); only
    running them needs a GPU, and a call that would run on another platform
    raises ``NotImplementedError`` saying so.
    """
    return _support_error() is None


def _require_dsl(what: str) -> None:
    if (err := _dsl_import_error()) is not None:
        raise ValueError(f"`{what}` is only available when the CuTe DSL "
                         f"(nvidia-cutlass-dsl) is installed: {err}")


# ---------------------------------------------------------------------------
# build_cute_ffi_call

_TVM_FFI_OPTION = re.compile(r"(^|[\s,])(?:--)?enable-tvm-ffi(?:=\S*?)?(?=$|[\s,])")
_noted_tvm_ffi = False


def _strip_tvm_ffi(options: str | None) -> str | None:
    """`options` without ``--enable-tvm-ffi`` (noted once per process)."""
    global _noted_tvm_ffi
    if not options:
        return None
    kept = _TVM_FFI_OPTION.sub(r"\1", options).strip(" ,")
    if kept != options.strip(" ,") and not _noted_tvm_ffi:
        _noted_tvm_ffi = True
        _log.info("cutecall.ejkernel: compile option --enable-tvm-ffi is ignored: "
                  "cutecall runs kernels through its own XLA FFI runtime, not "
                  "TVM-FFI (the other options are kept)")
    return kept or None


def _stream_position(fn) -> int | None:
    """Index of the launcher's stream among its positional parameters, as
    cutlass_call reads it (``_signature.analyze``), None if it has none; 0
    when the signature cannot be read or takes ``*args`` (the ``(stream,
    *inputs, *outputs)`` convention)."""
    sig = _signature.analyze(fn)
    if not sig.inspected:
        return 0
    return next((i for i, p in enumerate(sig.params)
                 if p.kind == _signature.STREAM), None)


def _ejkernel_launcher(fn, stream_at: int | None, num_outputs: int,
                       aliased: tuple, bound: tuple):
    """`fn` called the ejkernel way from cutecall's ``(stream, *inputs,
    *kernel_outputs)``: every output is passed, an aliased one as its input
    tensor (the same buffer), the stream where `fn` declares it, and the
    static kwargs in `bound` (those named like cutlass_call's own options).
    The closure holds only these values: they are part of the compile key."""

    def launch(stream, *tensors, **constexprs):
        alias = dict(aliased)
        num_kernel_outs = num_outputs - len(alias)
        ins = list(tensors[:len(tensors) - num_kernel_outs])
        outs = iter(tensors[len(ins):])
        args = ins + [ins[alias[j]] if j in alias else next(outs)
                      for j in range(num_outputs)]
        if stream_at is not None:
            args.insert(stream_at, stream)
        fn(*args, **dict(bound), **constexprs)

    launch.__name__ = getattr(fn, "__name__", "launcher")
    return launch


_CUTLASS_CALL_OPTIONS = frozenset(
    p.name for p in inspect.signature(cutlass_call).parameters.values()
    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


class CuteFFICall:
    """What :func:`build_cute_ffi_call` returns: call it with the runtime
    arrays (any pytree; flattened, ``None`` leaves dropped); it returns the
    ``output_shape_dtype`` pytree. Equal (for the named call cache) to any
    other with the same launcher content, outputs, aliases and options."""

    def __init__(self, fn, output_shape_dtype, input_output_aliases,
                 compile_options, static_kwargs):
        if not callable(fn):
            raise TypeError(f"fn must be a @cute.jit launcher, got "
                            f"{type(fn).__name__}: {fn!r}")
        leaves, self.out_tree = jax.tree_util.tree_flatten_with_path(
            output_shape_dtype)
        if not leaves:
            raise ValueError("output_shape_dtype has no leaves: "
                             f"{output_shape_dtype!r}")
        self.out_structs = tuple(
            _shape_dtype(x, f"output_shape_dtype{jax.tree_util.keystr(p)}")
            for p, x in leaves)
        aliases = dict(input_output_aliases or {})
        for i, o in aliases.items():
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                       for v in (i, o)):
                raise TypeError("input_output_aliases must map flattened input "
                                "indices to flattened output indices (ints >= 0), "
                                f"got {i!r}: {o!r}")
            if o >= len(self.out_structs):
                raise ValueError(f"input_output_aliases {{{i}: {o}}}: there are "
                                 f"only {len(self.out_structs)} outputs")
        self.fn = fn
        self.aliases = tuple(sorted(aliases.items()))
        self.options = _strip_tvm_ffi(compile_options)
        self.static_kwargs = tuple(sorted(static_kwargs.items()))
        try:
            _runtime.ensure_registered()
        except Exception as e:
            raise RuntimeError("cutecall could not register its FFI targets "
                               f"with JAX: {e}") from e
        bound = tuple((k, v) for k, v in self.static_kwargs
                      if k in _CUTLASS_CALL_OPTIONS)
        constexprs = {k: v for k, v in self.static_kwargs
                      if k not in _CUTLASS_CALL_OPTIONS}
        launcher = fn
        if self.aliases or bound:
            # Output o comes from input i: cutecall passes it to no launcher
            # parameter; the adapter hands fn the input tensor in its place.
            launcher = _ejkernel_launcher(
                fn, _stream_position(fn), len(self.out_structs),
                tuple((o, i) for i, o in self.aliases), bound)
        self._call = cutlass_call(
            launcher, output_shape_dtype=self.out_structs,
            input_output_aliases={i: o for i, o in self.aliases} or None,
            compile_options=self.options,
            name=getattr(fn, "__name__", None), **constexprs)
        self._key = None

    def __call__(self, *args):
        _require_dsl("build_cute_ffi_call")
        outs = self._call(*jax.tree.leaves(args))
        return jax.tree.unflatten(self.out_tree, list(outs))

    def lower(self, *args, platform: str = "cuda"):
        """Lowers a call for `platform`; arrays may be ShapeDtypeStructs.
        Needs no GPU: ``.as_text()`` shows the custom call."""
        _require_dsl("build_cute_ffi_call")
        return self._call.lower(*jax.tree.leaves(args), platform=platform)

    def content_key(self):
        """Hashable content of this call (computed once)."""
        if self._key is None:
            self._key = ("cute_ffi_call", _content_key(self.fn),
                         str(self.out_tree),
                         tuple((s.shape, str(s.dtype)) for s in self.out_structs),
                         self.aliases, self.options,
                         _content_key(self.static_kwargs))
        return self._key


def build_cute_ffi_call(fn: Callable, *, output_shape_dtype: Any,
                        input_output_aliases: Mapping[int, int] | None = None,
                        compile_options: str | None = None,
                        **static_kwargs: Any) -> CuteFFICall:
    """Creates a callable that runs a CuTe DSL launcher inside JAX.

    Example::

        from cutecall.ejkernel import build_cute_ffi_call, cute_call

        call = build_cute_ffi_call(
            launcher,  # @cute.jit (stream, x, y, out)
            output_shape_dtype=jax.ShapeDtypeStruct(x.shape, x.dtype))
        out = cute_call(x, y, call=call, out_shape=jax.ShapeDtypeStruct(
            x.shape, x.dtype))

    Args:
      fn: a ``@cute.jit`` launcher ``fn(stream, *inputs, *outputs,
        **static_kwargs)``. The stream (a parameter annotated
        ``cuda.CUstream`` or named ``stream``) may also be absent: launches
        that name no stream then go on XLA's stream. Inputs and outputs are
        flat ``cute.Tensor`` views, row-major, dynamic shapes (one compile
        serves every shape of the same ranks and dtypes).
      output_shape_dtype: a pytree of objects with ``.shape`` and ``.dtype``
        (``jax.ShapeDtypeStruct``); the outputs, flattened, are the trailing
        tensors of ``fn``.
      input_output_aliases: ``{flat input index: flat output index}``. The
        output is the input's buffer (donate the input to avoid XLA's copy);
        ``fn`` receives that buffer both as the input and as the output.
      compile_options: a ``cute.compile`` options string. ejkernel's
        ``"--enable-tvm-ffi"`` is accepted and ignored (noted once in the
        ``cutecall.ejkernel`` log): cutecall does not use TVM-FFI.
      **static_kwargs: compile-time keyword arguments of ``fn``; hashable
        Python values, part of the compile key.

    Returns:
      A :class:`CuteFFICall`: ``call(*arrays)`` returns the
      ``output_shape_dtype`` pytree, eagerly or under ``jax.jit``.
      ``jax.grad``/``jax.jvp`` raise ``NotImplementedError``
      (:class:`cutecall.DifferentiationError`): pair it with backward
      kernels with :func:`cutecall.differentiable` (or ``jax.custom_vjp``).
      ``jax.vmap`` works (ejkernel raises): one launch per batch element,
      with a one-time :class:`cutecall.VmapFallbackWarning`; to fold the
      batch into one launch use :func:`cutecall.cutlass_call` with
      ``batch_modes`` (docs/transforms.md).

    Raises:
      TypeError: ``fn`` is not callable, an output leaf has no shape/dtype,
        malformed aliases, an unusable static kwarg; at call time, an
        unsupported dtype.
      ValueError: no outputs, an alias to a missing output; at call time,
        the CuTe DSL is not installed.
      RuntimeError: cutecall's FFI targets cannot be registered with JAX.
    """
    return CuteFFICall(fn, output_shape_dtype, input_output_aliases,
                       compile_options, static_kwargs)


# ---------------------------------------------------------------------------
# Content keys (the named call cache)

class _Identity:
    """Keys an object by identity and keeps it alive while keyed, so its id
    cannot be reused by another object."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Identity) and other.obj is self.obj

    def __repr__(self):
        return f"_Identity({type(self.obj).__name__})"


_MAX_DEPTH = 8
_MAX_ITEMS = 64


def _content_key(obj, _depth: int = 0):
    """A hashable key equal for two objects only if calling them behaves the
    same: immutable values by value (floats bit-exact), tuples item by item,
    functions by module, code, globals, defaults and closure values,
    :class:`CuteFFICall` by content; anything else (mutable containers
    included: a cached callable must act on the same objects) by identity."""
    if obj is None or isinstance(obj, (bool, int, str, bytes)):
        return (type(obj).__name__, obj)
    if isinstance(obj, float):
        return ("float", obj.hex())
    if isinstance(obj, np.generic):
        return ("np", obj.dtype.str, obj.tobytes())
    if isinstance(obj, np.dtype):
        return ("dtype", str(obj))
    if isinstance(obj, jax.ShapeDtypeStruct):
        return ("struct", tuple(str(d) for d in obj.shape), str(obj.dtype))
    if isinstance(obj, CuteFFICall):
        return obj.content_key()
    if _depth >= _MAX_DEPTH:
        return _Identity(obj)
    sub = functools.partial(_content_key, _depth=_depth + 1)
    if type(obj) in (tuple, frozenset) and len(obj) <= _MAX_ITEMS:
        items = obj if type(obj) is tuple else sorted(obj, key=repr)
        return (type(obj).__name__,) + tuple(sub(v) for v in items)
    if isinstance(obj, types.FunctionType):
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(sub(cell.cell_contents))
            except ValueError:  # an empty cell
                cells.append(("empty-cell",))
        kwdefaults = sorted((obj.__kwdefaults__ or {}).items())
        return ("function", obj.__module__, obj.__qualname__, obj.__code__,
                _Identity(obj.__globals__), sub(obj.__defaults__),
                tuple((k, sub(v)) for k, v in kwdefaults), tuple(cells))
    if isinstance(obj, types.MethodType):
        return ("method", sub(obj.__self__), sub(obj.__func__))
    if isinstance(obj, functools.partial):
        return ("partial", sub(obj.func), sub(obj.args),  # keywords: its own copy
                tuple((k, sub(v)) for k, v in sorted(obj.keywords.items())))
    return _Identity(obj)


def _arg_key(x):
    if isinstance(x, (jax.Array, _Tracer)) or (
            hasattr(x, "shape") and hasattr(x, "dtype")):
        return ("array", tuple(str(d) for d in x.shape), str(x.dtype),
                bool(getattr(getattr(x, "aval", None), "weak_type", False)))
    return _content_key(x)


class _NamedCalls:
    """The named call cache: (name, content of `call`, argument and output
    contracts, device) -> the first callable seen with that key. A hit is a
    callable that behaves like the one passed (same content), with JAX's
    trace caches already warm. Bounded LRU, thread-safe."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.entries: collections.OrderedDict = collections.OrderedDict()
        self.lock = threading.Lock()

    def get_or_put(self, key, call_key, call):
        """The cached callable for `key` if its content is still `call_key`
        (a closure's cells can be rebound after it was cached), else `call`,
        which then takes the entry."""
        with self.lock:
            hit = self.entries.get(key)
            if hit is not None and _content_key(hit) == call_key:
                self.entries.move_to_end(key)
                return hit
            self.entries[key] = call
            self.entries.move_to_end(key)
            while len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
            return call

    def clear(self):
        with self.lock:
            self.entries.clear()


_NAMED_CALLS = _NamedCalls(256)


# ---------------------------------------------------------------------------
# Placement

def _in_shard_map(flat_args: Sequence[Any] = ()) -> bool:
    """Whether the caller is being traced inside ``jax.shard_map`` (or
    ``jax.pmap``, which JAX runs through it): the abstract mesh of the trace
    context (public ``jax.sharding.get_abstract_mesh()``) has
    manual axes. Older JAX: a traced argument varies over manual axes
    (``aval.vma``). A ``with mesh:`` block or ``jax.set_mesh`` alone is not
    shard_map: XLA partitions that program itself."""
    get_mesh = getattr(jax.sharding, "get_abstract_mesh", None)
    if get_mesh is not None:
        mesh = get_mesh()
        manual = getattr(mesh, "manual_axes", None)
        if manual is None:
            manual_type = getattr(jax.sharding.AxisType, "Manual", None)
            manual = [t for t in getattr(mesh, "axis_types", ()) if t == manual_type]
        if manual:
            return True
    for x in flat_args:
        if isinstance(x, _Tracer):
            aval = getattr(x, "aval", None)
            if getattr(aval, "vma", None):
                return True
            mat = getattr(aval, "manual_axis_type", None)
            if getattr(mat, "varying", None):
                return True
    return False


def _accelerator_count() -> int:
    """Non-CPU devices of JAX's default backend."""
    try:
        devices = jax.devices()
    except RuntimeError:
        return 0
    return sum(1 for d in devices if getattr(d, "platform", "cpu") != "cpu")


def _traced_span(x) -> int:
    """Devices a traced argument's (explicit) sharding splits it over; 1 when
    unsharded or unknown."""
    sharding = getattr(getattr(x, "aval", None), "sharding", None)
    mesh, spec = getattr(sharding, "mesh", None), getattr(sharding, "spec", None)
    sizes = dict(getattr(mesh, "shape", None) or {})
    if not sizes or spec is None:
        return 1
    manual = set(getattr(mesh, "manual_axes", ()) or ())
    axes = [a for entry in spec if entry is not None
            for a in ((entry,) if isinstance(entry, str) else entry)
            if isinstance(a, str)]
    return math.prod(sizes.get(a, 1) for a in axes if a not in manual)


def _check_placement(flat_args, device, in_smap: bool) -> None:
    if device is not None and (not isinstance(device, int) or
                               isinstance(device, bool)):
        raise TypeError(f"`device` must be a device index (int), got "
                        f"{type(device).__name__}: {device!r}")
    placed = []  # (argument index, its device)
    for i, x in enumerate(flat_args):
        if isinstance(x, _Tracer):
            span = _traced_span(x)
            if span > 1 and not in_smap:
                raise AssertionError(
                    "cute_call requires all array arguments to be on a single "
                    f"device. Argument {i} is sharded across {span} devices "
                    f"({x.aval}). Use `jax.shard_map` for multi-device "
                    "execution.")
        elif isinstance(x, jax.Array):
            devices = x.sharding.device_set
            if len(devices) != 1:
                raise AssertionError(
                    "cute_call requires all array arguments to be on a single "
                    f"device. Argument {i} is sharded across {len(devices)} "
                    "devices. Use `jax.shard_map` for multi-device execution.")
            placed.append((i, next(iter(devices))))
    for i, d in placed[1:]:
        if d != placed[0][1]:
            raise AssertionError(
                "cute_call requires all array arguments to be on the same "
                f"device. Argument {i} is on {d}, argument {placed[0][0]} on "
                f"{placed[0][1]}.")
    if device is None:
        return
    platform = placed[0][1].platform if placed else None
    devices = jax.devices(platform) if platform else jax.devices()
    if not 0 <= device < len(devices):
        raise ValueError(f"`device={device}` is out of range: JAX sees "
                         f"{len(devices)} {devices[0].platform} device(s).")
    if placed and devices[device] != placed[0][1]:
        raise AssertionError(
            "cute_call received inputs on a different device than the requested "
            f"`device={device}` ({devices[device]}): they are on {placed[0][1]}. "
            "Place inputs on the target device or adjust the `device` argument.")


# ---------------------------------------------------------------------------
# cute_call

def cute_call(*args: Any, call: Callable[..., Any] | None = None,
              out_shape: Any = None, out: Any = None, name: str | None = None,
              device: int | None = None) -> Any:
    """Runs a CuTe DSL kernel callable and returns its output(s).

    Example::

        call = build_cute_ffi_call(launcher, output_shape_dtype=spec)
        y = cute_call(x, call=call, out_shape=spec, name="my_kernel")

    Args:
      *args: passed to ``call`` unchanged (arrays, pytrees).
      call: the kernel callable, e.g. from :func:`build_cute_ffi_call`; it
        must return the output arrays (any callable returning arrays works).
      out_shape: the output contract: a ``ShapeDtype`` (``.shape`` and
        ``.dtype``) or a pytree / sequence of them.
      out: arrays whose shapes, dtypes and pytree form the contract instead
        (metadata only: nothing is written into them). With ``out_shape``
        too, they must agree with it.
      name: the ``jax.named_scope`` of the call (default ``"cute_call"``)
        and part of the named call cache key. The key also holds the
        content of ``call`` (its code, closure values and static
        parameters), the arguments' shapes/dtypes, the contract and
        ``device``: a hit returns an equivalent callable with warm trace
        caches, never another kernel.
      device: a device index (of the arguments' platform) the array
        arguments must be on. Checked, not used for placement.

    Returns:
      The outputs of ``call`` in the pytree structure of ``out`` (else
      ``out_shape``): ``call``'s result is flattened and its leaves, in
      flattening order (dict keys sorted), fill that tree. So ``call`` may
      return ``[y]`` where the contract is ``{"r": ...}``::

        y = cute_call(x, call=lambda x: [x * 2],
                      out_shape={"r": jax.ShapeDtypeStruct(x.shape, x.dtype)})
        y["r"]

    Raises:
      ValueError: the CuTe DSL is not installed; ``call`` is None; neither
        ``out`` nor ``out_shape`` is given; ``call`` returns None; the
        result's leaf count, a shape or a dtype differs from the contract
        (the message names the leaf by key path, expected and got), or
        ``out`` disagrees with ``out_shape``; ``device`` is out of range.
      TypeError: a leaf of ``out`` or of the result is not a JAX array, an
        ``out_shape`` leaf has no shape/dtype, ``device`` is not an int.
      AssertionError: an array argument spans several devices, arguments
        are on different devices or not on ``device``; or more than one
        accelerator is visible and the call is not inside ``jax.shard_map``.
    """
    _require_dsl("cute_call")
    if call is None:
        raise ValueError(
            "Provide `call` to `cute_call`. For JIT/tracing, pass a CuTe "
            "primitive callable (e.g. from `build_cute_ffi_call`).")
    if not callable(call):
        raise TypeError(f"`call` must be callable, got {type(call).__name__}: "
                        f"{call!r}")
    contract = OutputContract(out_shape, out)
    flat_args = jax.tree.leaves(args)
    in_smap = _in_shard_map(flat_args)
    _check_placement(flat_args, device, in_smap)
    if not in_smap and (accelerators := _accelerator_count()) > 1:
        raise AssertionError(
            f"Multiple accelerator devices detected ({accelerators}). "
            "cute_call must be invoked under `jax.shard_map` in "
            "multi-accelerator setups.")
    if name is not None:
        call_key = _content_key(call)
        key = (str(name), call_key, str(jax.tree.structure(args)),
               tuple(_arg_key(x) for x in flat_args), contract.key(), device)
        call = _NAMED_CALLS.get_or_put(key, call_key, call)
    with jax.named_scope("cute_call" if name is None else str(name)):
        result = call(*args)
    return contract.check(result)
