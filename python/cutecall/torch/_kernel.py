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
from typing import Any, Callable

import torch

from .. import _compile, _core, _signature, _spec
from . import _common

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

    def __init__(self, launcher: Callable, *, outputs: int = 1,
                 allocate: Callable | None = None, name: str | None = None,
                 compile_options: str | None = None, **constexprs):
        if not callable(launcher):
            raise TypeError(f"cutecall: launcher must be callable, got "
                            f"{type(launcher).__name__}: {launcher!r}")
        if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 0:
            raise ValueError(f"cutecall: outputs must be an int >= 0 (how many of "
                             f"the launcher's last tensor parameters it writes), "
                             f"got {outputs!r}")
        if allocate is not None and not callable(allocate):
            raise TypeError(f"cutecall: allocate must be a callable returning the "
                            f"output tensors, got {allocate!r}")
        if compile_options is not None and not isinstance(compile_options, str):
            raise TypeError(f"cutecall: compile_options must be a str, got "
                            f"{compile_options!r}")
        self.fn = launcher
        self.sig = _signature.analyze(launcher)
        self.sig.check_constexprs(constexprs)
        self.name = name or self.sig.name
        self.constexprs = tuple(sorted(constexprs.items()))
        for k, v in self.constexprs:
            _spec.fingerprint(v, f"constexpr {k!r}")
        self.options = compile_options
        self.num_outputs = outputs
        self.allocate = allocate
        self.params = self._open_params()
        self.output_params = self._output_params()
        self.launch = _core.TensorLauncher(self.name, [], self._on_miss)
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

    def _output_params(self) -> list[str]:
        tensors = [p.name for p in self.params
                   if p.kind == _signature.TENSOR and not p.has_default]
        if self.sig.inspected and self.num_outputs > len(tensors):
            raise ValueError(f"cutecall: launcher '{self.name}' has "
                             f"{len(tensors)} tensor parameters, fewer than "
                             f"outputs={self.num_outputs}")
        return tensors[len(tensors) - self.num_outputs:] if self.num_outputs else []

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
        names = [p.name for p in self.params] if self.sig.inspected else []
        what = [f"argument {names[k]!r}" if k < len(names) else f"argument {k}"
                for k in range(len(args))]
        for k, a in enumerate(args):  # kinds first, then where tensors live
            if k < len(names) and self.params[k].kind == _signature.SCALAR \
                    and isinstance(a, torch.Tensor):
                raise TypeError(f"cutecall: {what[k]} of '{self.name}' is a runtime "
                                f"scalar ({self.params[k].scalar_type}); pass a "
                                f"Python value, got a tensor")
            if not isinstance(a, (torch.Tensor, bool, int, float)):
                raise TypeError(f"cutecall: {what[k]} of '{self.name}' must be a "
                                f"torch.Tensor or a bool/int/float, got "
                                f"{type(a).__name__}: {a!r}")
        device = None
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                device = self._check_tensor(a, what[k], device)
        if device is None:
            raise ValueError(f"cutecall: '{self.name}' was called without a "
                             "tensor; a launch runs on its tensors' device")
        arch = _common.device_arch(device)
        spec, uses = self.specialize(args, props, arch)
        kernel = _common.compile_spec(spec, self.name, self.options, arch)
        return _common.registration(kernel, uses)

    def specialize(self, args, props, arch: str):
        """The KernelSpec (and per-argument uses) of a call whose tensors
        have C++'s `props` (unit-stride dim, alignment, 64-bit), for `arch`.
        No device needed: tests build specializations from CPU tensors."""
        names = [p.name for p in self.params] if self.sig.inspected else []
        binding, _ = _signature.bind(self.sig, args, {}, 0, "inputs_first",
                                     {k for k, _ in self.constexprs})
        operands = []
        for a, k in enumerate(binding.arrays):
            if props[k] is None:
                raise RuntimeError(f"cutecall: '{self.name}': tensor argument {k} "
                                   "could not be read through DLPack")
            nm = names[k] if k < len(names) else f"arg{k}"
            operands.append(_common.operand(nm, a, args[k], props[k]))
        scalar_types = tuple(s.scalar_type for s in binding.scalars)
        key = _spec.specialization_key(
            self.fn, operands, "torch", "", self.constexprs, self.options, arch,
            _compile.versions(),
            extra=["torch", list(map(list, binding.slots)), list(scalar_types)])
        params = self.sig.params if self.sig.inspected else ()
        spec = _compile.KernelSpec(
            launcher=self.fn, constexprs=self.constexprs,
            operands=tuple(operands), num_inputs=len(operands),
            num_args=len(operands), num_rets=0,
            input_tree=_compile.FlatTree(len(operands)),
            output_tree=_compile.FlatTree(0), key=key,
            param_names=tuple(p.name for p in params) or
            tuple(f"p{i}" for i in range(len(binding.slots))),
            slots=binding.slots, keyword_scalars=binding.keyword_scalars,
            scalar_types=scalar_types)
        uses, s = [], 0
        array_index = {k: a for a, k in enumerate(binding.arrays)}
        for k in range(len(args)):
            if k in array_index:
                uses.append((_common.USE_TENSOR, array_index[k], 0))
            else:
                uses.append((_common.USE_SCALAR, s,
                             _common.SCALAR_CODE[scalar_types[s]]))
                s += 1
        return spec, uses

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


def kernel(launcher: Callable, *, outputs: int = 1,
           allocate: Callable | None = None, name: str | None = None,
           compile_options: str | None = None, **constexprs: Any) -> Kernel:
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
      outputs: how many of the launcher's last tensor parameters it writes
        (1). They are the ones ``torch.compile`` treats as mutated, and the
        ones ``allocate`` creates.
      allocate: ``allocate(*args) -> Tensor | tuple[Tensor, ...]``: makes the
        outputs from the call's arguments (e.g. ``torch.empty_like``); the
        call then omits them and returns them. Default None: the caller
        passes every tensor and the call returns None.
      name: the kernel's name in errors (default: the launcher's).
      compile_options: CuTe DSL compile options (``--gpu-arch`` defaults to
        the tensors' device; ``$CUTECALL_ARCH`` overrides).
      **constexprs: compile-time values for the launcher's parameters.

    One compile serves every shape and stride (views included) of a
    specialization: dtypes, ranks, the unit-stride dim, pointer alignment
    (16, 8, 4... bytes), 64-bit extents, device, and the constexprs. Calls
    run on ``torch.cuda.current_stream()`` of the tensors' device (captured
    by ``torch.cuda.graph``), on that device even when another is current.
    Runtime scalars are passed positionally; annotate them (``cutlass.Int32``,
    ``cutlass.Float32``...) to use the kernel under ``torch.compile``.
    """
    return Kernel(launcher, outputs=outputs, allocate=allocate, name=name,
                  compile_options=compile_options, **constexprs)
