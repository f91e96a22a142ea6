"""Launch objects: a ``@cute.jit`` launcher, callable with torch tensors.

A call goes straight into C++ (``_core.TensorLauncher``): it reads each
tensor's pointer, shape and strides through DLPack's C exchange API, picks
the compiled specialization, packs the launch plan and runs on the current
CUDA stream of the tensors' device. Python runs only on the first call of a
specialization (to compile it) and to report bad arguments.
"""

from __future__ import annotations

import itertools
import re
import weakref
from typing import Any, Callable, Sequence

import torch

from .._driver import binding as _binding
from .._driver import compiler as _compile
from .._driver import fingerprint as _fingerprint
from .._driver import signature as _signature
from .._driver import spec as _spec
from .. import _core
from . import _common, _specialize

_op_ids = itertools.count()
_is_compiling = torch.compiler.is_compiling  # dynamo folds it to True
_SCHEMA_SCALAR = {"Boolean": "bool", "Float32": "float", "Float64": "float"}


class Kernel:
    """A CuTe DSL launcher bound to torch tensors. Build with :func:`kernel`.

    ``k(*args)`` passes the launcher's tensor and runtime-scalar parameters
    positionally, in the launcher's order (the stream parameter and the
    constexprs given to :func:`kernel` excluded). Without ``allocate`` every
    tensor, outputs included, comes from the caller and the call returns
    None; with ``allocate`` the call omits the outputs and returns them.

    ``k.launch`` is the C++ launcher itself: the same call minus the
    ``torch.compile`` check, for the tightest eager loops (caller-allocated
    outputs only).
    """

    def __init__(self, launcher: Callable, *, outputs: int | Sequence[str] = 1,
                 allocate: Callable | None = None, name: str | None = None,
                 compile_options: str | None = None,
                 static: bool | dict | None = None,
                 static_fallback: bool | None = None, dims: dict | None = None,
                 **constexprs):
        if not callable(launcher):
            raise TypeError(f"cutecall: launcher must be callable, got "
                            f"{type(launcher).__name__}: {launcher!r}")
        output_names = None
        if isinstance(outputs, (list, tuple)):
            output_names = tuple(outputs)
            if not all(isinstance(o, str) for o in output_names):
                raise TypeError(f"cutecall: outputs must be an int or parameter "
                                f"names, got {outputs!r}")
            outputs = len(output_names)
        if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 0:
            raise ValueError(f"cutecall: outputs must be an int >= 0 (how many "
                             f"tensor parameters the launcher writes) or their "
                             f"names, got {outputs!r}")
        if allocate is not None and not callable(allocate):
            raise TypeError(f"cutecall: allocate must be a callable returning the "
                            f"output tensors, got {allocate!r}")
        if compile_options is not None and not isinstance(compile_options, str):
            raise TypeError(f"cutecall: compile_options must be a str, got "
                            f"{compile_options!r}")
        self.fn = launcher
        self.sig = _signature.analyze(launcher)
        # Taken now: a kernel object's attributes may change while traced.
        self.fingerprint = _fingerprint.launcher_fingerprint(launcher)
        self.sig.check_constexprs(constexprs)
        self.name = name or self.sig.name
        self.constexprs = tuple(sorted(constexprs.items()))
        for k, v in self.constexprs:
            _spec.fingerprint(v, f"constexpr {k!r}")
        self.options = compile_options
        self.num_outputs = outputs
        self.allocate = allocate
        self.static_fallback = _compile.check_fallback_option(static_fallback)
        self.params = self._open_params()
        self.output_params = self._output_params(output_names)
        self.launch = _core.TensorLauncher(self.name, [], self._on_miss)
        self.static_masks = None  # per argument: what is compiled in
        self.dims = _specialize.dims_from_option(dims, self.params)
        masks = _specialize.masks_from_option(static, self.params)
        if masks is not None:
            self.use_static_masks(masks)
        self._eager = self.launch if allocate is None else \
            (lambda *args: self._allocate_and_launch(args))
        self._op = self._custom_op()

    def __call__(self, *args):
        if _is_compiling():
            return self._op(*args)
        return self._eager(*args)

    def __repr__(self):
        return (f"cutecall.torch.Kernel({self.name}, "
                f"{len(self.launch)} specialization(s))")

    # -- signature ---------------------------------------------------------

    def _open_params(self) -> list[_signature.Param]:
        """Launcher parameters a call fills, in order."""
        given = {k for k, _ in self.constexprs}
        return [p for p in self.sig.params
                if p.kind in (_signature.TENSOR, _signature.SCALAR)
                and p.name not in given]

    def _output_params(self, names) -> list[str]:
        """The parameters the kernel writes: `names`, else placed by the
        binding rule (``_binding``) for a call that passes a value of its
        annotated kind to every other parameter without a default."""
        tensors = [p.name for p in self.params if p.kind == _signature.TENSOR]
        if names is not None:
            for n in names:
                if n not in tensors:
                    raise ValueError(f"cutecall: outputs names {n!r}, which is "
                                     f"not a tensor parameter of '{self.name}'; "
                                     f"those are {', '.join(tensors)}")
            return list(names)
        if not self.num_outputs or not self.sig.inspected:
            return []
        index = {p.name: i for i, p in enumerate(self.sig.params)}
        required = [index[p.name] for p in self.params if not p.has_default]
        found = list(_binding.placements(self.sig, required, None,
                                         self.num_outputs, "inputs_first"))
        if not found:
            raise ValueError(f"cutecall: launcher '{self.name}' has "
                             f"{len(tensors)} tensor parameters without "
                             f"defaults, fewer than outputs={self.num_outputs}")
        best = min(found, key=lambda placement: placement[0])[1]
        return [self.sig.params[i].name for i in best]

    def _allocate_and_launch(self, args):
        outs = self.allocate(*args)
        single = isinstance(outs, torch.Tensor)
        outs = (outs,) if single else tuple(outs)
        if len(outs) != self.num_outputs:
            raise ValueError(f"cutecall: allocate of '{self.name}' returned "
                             f"{len(outs)} tensors, expected {self.num_outputs}")
        self.launch(*self._merge(args, outs))
        return outs[0] if single else outs

    def _merge(self, args, outs) -> list:
        """The launcher-order arguments: the call's, with outputs placed at
        the output parameters (at the end for an uninspected launcher)."""
        if not self.sig.inspected:
            return [*args, *outs]
        merged, a, o = [], iter(args), iter(outs)
        out_names = set(self.output_params)
        n_args = len(args)
        used = 0
        for p in self.params:
            if p.name in out_names:
                merged.append(next(o))
            elif used < n_args:
                merged.append(next(a))
                used += 1
            else:
                break
        if used < n_args:
            raise TypeError(f"cutecall: '{self.name}' takes "
                            f"{len(self.params) - self.num_outputs} arguments "
                            f"besides its outputs, got {n_args}")
        return merged

    # -- the slow path: compile a specialization, or explain the error ------

    def _on_miss(self, args, props):
        what = self._check_kinds(args, (torch.Tensor,))
        device = None
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                device = self._check_tensor(a, what[k], device)
        if device is None:
            raise ValueError(f"cutecall: '{self.name}' was called without a "
                             "tensor; a launch runs on its tensors' device")
        kernel, uses = _specialize.compile_call(
            self, args, props, _common.device_arch(device))
        return _common.registration(kernel, uses)

    def _check_kinds(self, args, tensor_types) -> list[str]:
        """Raises for an argument no parameter can take; returns how errors
        name each argument."""
        names = [p.name for p in self.params] if self.sig.inspected else []
        what = [f"argument {names[k]!r}" if k < len(names) else f"argument {k}"
                for k in range(len(args))]
        for k, a in enumerate(args):
            if k < len(names) and self.params[k].kind == _signature.SCALAR \
                    and isinstance(a, tensor_types):
                raise TypeError(f"cutecall: {what[k]} of '{self.name}' is a runtime "
                                f"scalar ({self.params[k].scalar_type}); pass a "
                                f"Python value, got a tensor")
            if not (a is None or isinstance(a, (bool, int, float) + tensor_types)):
                raise TypeError(f"cutecall: {what[k]} of '{self.name}' must be a "
                                f"torch.Tensor, None or a bool/int/float, got "
                                f"{type(a).__name__}: {a!r}")
        return what

    def specialize(self, args, props, arch: str):
        """(KernelSpec, per-argument uses) of a launcher-order call whose
        tensors have C++'s `props` (``_core.layout_props``), for `arch`;
        what the miss path compiles, without compiling. No device needed."""
        return _specialize.build(self, args, props, arch, self.static_masks)[:2]

    def use_static_masks(self, masks) -> None:
        """Compiles in what `masks` names from now on (per argument: bit d
        the extent of dim d, bit 8+d its stride); the static fallback calls
        this with the rung that compiled."""
        self.static_masks = list(masks)
        self.launch.set_static(self.static_masks)

    def compile(self, *args, arch: str | None = None) -> _compile.CompiledKernel:
        """Compiles (or finds in the artifact store) the specialization these
        arguments select, without launching. Needs no GPU.

        Example::

            k = cutecall.torch.kernel(vector_add_launcher)
            meta = torch.empty(4096, device="meta")
            k.compile(meta, meta, meta)         # a server warms up, CI checks
            k.compile(TensorDesc((4096,), torch.float32), ...)   # or describe

        Args:
          *args: the launcher-order arguments of a call, as for ``k(...)``
            (without the outputs when ``allocate`` is set: they are
            allocated like the arguments, e.g. on ``meta``). Tensors may be
            real, ``device="meta"`` (pointer taken as 16-byte aligned) or
            :class:`TensorDesc`; scalars are example values.
          arch: the target (default ``$CUTECALL_ARCH``, else the tensors'
            CUDA device, else ``sm_90a``).

        Returns:
          The :class:`cutecall.CompiledKernel`. The first launch with
          tensors of the same layout classes finds it instead of compiling.
        """
        if self.allocate is not None and \
                len(args) == len(self.params) - self.num_outputs:
            outs = self.allocate(*args)
            outs = (outs,) if isinstance(outs, torch.Tensor) else tuple(outs)
            args = tuple(self._merge(args, outs))
        self._check_kinds(args, (torch.Tensor, _specialize.TensorDesc))
        cuda = next((a.device for a in args if isinstance(a, torch.Tensor)
                     and a.device.type == "cuda"), None)
        arch = arch or (_common.device_arch(cuda) if cuda is not None
                        else _compile.default_arch())
        props = [_common.tensor_props(a) if _specialize.is_tensor(a) else None
                 for a in args]
        return _specialize.compile_call(self, args, props, arch)[0]

    def _check_tensor(self, t: torch.Tensor, what: str, device):
        if t.device.type != "cuda":
            raise ValueError(f"cutecall: {what} of '{self.name}' is on "
                             f"{t.device}; cutecall launches CUDA tensors")
        if t.dim() == 0:
            raise ValueError(f"cutecall: {what} of '{self.name}' is rank 0; "
                             "pass a shape-(1,) tensor")
        if t.dim() > _spec.MAX_RANK:
            raise ValueError(f"cutecall: {what} of '{self.name}' has rank "
                             f"{t.dim()} > {_spec.MAX_RANK}")
        if _common.dtype_entry(t.dtype) is None:
            raise TypeError(f"cutecall: {what} of '{self.name}' has dtype "
                            f"{t.dtype}, which has no CuTe DSL type; supported: "
                            f"{_common.supported_dtypes()}")
        if device is not None and t.device != device:
            raise ValueError(f"cutecall: {what} of '{self.name}' is on "
                             f"{t.device} but an earlier tensor is on {device}; "
                             "one launch runs on one device")
        return t.device

    # -- torch.compile ------------------------------------------------------

    def _custom_op(self):
        """A torch.library op that torch.compile traces through: the real
        implementation is the C++ launch; the fake one allocates (functional
        form, with `allocate`) or does nothing (outputs mutated in place)."""
        types = []
        for p in self.params:
            t = "Tensor" if p.kind == _signature.TENSOR else \
                _SCHEMA_SCALAR.get(p.scalar_type, "int")
            types.append(t)
        this = weakref.ref(self)  # torch's op registry must not keep self alive

        def launch(*args):
            this().launch(*args)

        def allocate_and_launch(*args):
            return this()._allocate_and_launch(args)

        base = re.sub(r"\W", "_", self.name)
        qualname = f"cutecall::{base}_{next(_op_ids)}"
        if self.allocate is None:
            letters = iter("abcdefghijklmnopqrstuvwxyz")
            args = [f"{t}({next(letters)}!) {p.name}"
                    if p.name in self.output_params else f"{t} {p.name}"
                    for p, t in zip(self.params, types)]
            schema = f"({', '.join(args)}) -> ()"
            op = torch.library.custom_op(
                qualname, launch, mutates_args=tuple(self.output_params),
                schema=schema)
            op.register_fake(lambda *args: None)
            return op
        ins = [(p, t) for p, t in zip(self.params, types)
               if p.name not in self.output_params]
        rets = "Tensor" if self.num_outputs == 1 else \
            "(" + ", ".join(["Tensor"] * self.num_outputs) + ")"
        schema = f"({', '.join(f'{t} {p.name}' for p, t in ins)}) -> {rets}"
        op = torch.library.custom_op(qualname, allocate_and_launch,
                                     mutates_args=(), schema=schema)
        op.register_fake(self.allocate)
        return op


def kernel(launcher: Callable, *, outputs: int | Sequence[str] = 1,
           allocate: Callable | None = None, name: str | None = None,
           compile_options: str | None = None,
           static: bool | dict | None = None,
           static_fallback: bool | None = None, dims: dict | None = None,
           **constexprs: Any) -> Kernel:
    """Makes a ``@cute.jit`` launcher callable with torch tensors.

    Example::

        import torch, cutecall.torch
        from cutecall.examples.kernels import vector_add_launcher

        add = cutecall.torch.kernel(vector_add_launcher)
        a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        out = torch.empty_like(a)
        add(a, b, out)                      # caller-allocated: returns None

        add2 = cutecall.torch.kernel(vector_add_launcher,
                                     allocate=lambda a, b: torch.empty_like(a))
        out = add2(a, b)                    # the launch object allocates

    Args:
      launcher: a ``@cute.jit`` function taking the stream (a ``CUstream``
        parameter, or one named ``stream``; optional), ``cute.Tensor``
        parameters, runtime scalars annotated with a DSL type
        (``cutlass.Float32``...), and constexprs.
      outputs: how many tensor parameters the launcher writes (1), or
        their names. By number, they are placed as cutecall's binding rule
        places them: tensor parameters without defaults right after the
        inputs, before any runtime scalars (QuACK's and FA4's convention).
        They are the ones ``torch.compile`` treats as mutated, and the ones
        ``allocate`` creates.
      allocate: ``allocate(*args) -> Tensor | tuple[Tensor, ...]``: makes the
        outputs from the call's arguments (e.g. ``torch.empty_like``); the
        call then omits them and returns them. Default None: the caller
        passes every tensor and the call returns None.
      name: the kernel's name in errors (default: the launcher's).
      compile_options: CuTe DSL compile options (``--gpu-arch`` defaults to
        the tensors' device; ``$CUTECALL_ARCH`` overrides).
      static: compile extents (and strides) in: ``True`` for every one of
        every tensor (one compile per shape and stride), or
        ``{parameter: True | per-dim bools}`` for some extents. Default:
        everything dynamic, and the static fallback decides.
      static_fallback: when the DSL rejects dynamic layouts, compile the
        fewest extents in that make the kernel compile (warning once,
        :class:`cutecall.StaticFallbackWarning`); ``False`` raises instead.
        Default: ``$CUTECALL_STATIC_FALLBACK`` (on unless ``0``).
      dims: ``{parameter: (name or None per dim)}`` ties extents across
        tensors, as ``TensorSpec(dims=)`` does in JAX: dims that share a
        name must be equal, checked in C++ before every launch (an error
        names both tensors, their dims and values). Without it the launcher
        knows only each tensor's own layout, not how they must agree.
      **constexprs: compile-time values for the launcher's parameters.

    One compile serves every shape and stride (views included) of a
    specialization: dtypes, ranks, the unit-stride dim, pointer alignment
    (16, 8, 4... bytes), the divisibility class of every extent and stride
    (the largest power of two dividing it, up to 16 bytes' worth of
    elements), 64-bit extents, device, and the constexprs. ``None`` passes
    ``None`` to an ``Optional`` tensor parameter. ``k.compile(*args)``
    compiles a specialization ahead of time, without a GPU. Calls
    run on ``torch.cuda.current_stream()`` of the tensors' device (captured
    by ``torch.cuda.graph``), on that device even when another is current.
    Runtime scalars are passed positionally; annotate them (``cutlass.Int32``,
    ``cutlass.Float32``...) to use the kernel under ``torch.compile``.
    """
    return Kernel(launcher, outputs=outputs, allocate=allocate, name=name,
                  compile_options=compile_options, static=static,
                  static_fallback=static_fallback, dims=dims, **constexprs)
