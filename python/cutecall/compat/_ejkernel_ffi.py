"""ejkernel's ``build_cute_ffi_call`` and ``has_cute_ffi_support``, run by
cutecall: a CuTe DSL launcher in ejkernel's convention (outputs last,
optional stream, static keyword arguments) becomes a JAX callable through
:func:`cutecall.cutlass_call`. TVM-FFI compile options are dropped
(cutecall compiles its own ABI). Also here, shared with ``cute_call``:
whether the API can run (the DSL imports, its runtime library is found,
cutecall's FFI targets register; checked lazily). Content keys of
callables are in ``_ejkernel_keys``."""

from __future__ import annotations

import functools
import inspect
import logging
import re
from typing import Any, Callable, Mapping

import jax

from .._driver import runtime as _runtime, signature as _signature
from ..jax import _targets
from ..jax._api import cutlass_call
from ._ejkernel_keys import content_key as _content_key

_log = logging.getLogger("cutecall.ejkernel")
_Tracer = jax.core.Tracer

# -- can it run here ------------------------------------------------------------

@functools.cache
def _dsl_import_error() -> str | None:
    """None when the CuTe DSL imports, else why not."""
    try:
        import cutlass  # noqa: F401
        import cutlass.cute  # noqa: F401
    except Exception as e:  # a broken install raises more than ImportError
        return f"{type(e).__name__}: {e}"
    return None


def _support_error() -> str | None:
    if (err := _dsl_import_error()) is not None:
        return f"the CuTe DSL does not import ({err})"
    if _runtime.find_runtime_library() is None:
        return ("the CuTe DSL runtime library libcute_dsl_runtime.so was not "
                "found (install nvidia-cutlass-dsl-libs-cu13 or -cu12, or set "
                "$CUTECALL_DSL_RUNTIME)")
    try:
        _targets.ensure_registered()
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


def shape_dtype(x, what: str) -> jax.ShapeDtypeStruct:
    """`x`'s shape and dtype, or TypeError naming `what` and the value."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise TypeError(f"{what} must have .shape and .dtype (e.g. a "
                        f"jax.ShapeDtypeStruct), got {type(x).__name__}: {x!r}")
    return jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)


# -- build_cute_ffi_call ------------------------------------------------------------

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
            shape_dtype(x, f"output_shape_dtype{jax.tree_util.keystr(p)}")
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
            _targets.ensure_registered()
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
