"""Launch objects: a ``@cute.jit`` launcher, callable with torch tensors.

A call goes straight into C++ (``_core.TensorLauncher``): it reads each
tensor's pointer, shape and strides through DLPack's C exchange API, picks
the compiled specialization, packs the launch plan and runs on the current
CUDA stream of the tensors' device. Python runs only on the first call of a
specialization -- the driver's launch object (``_driver.launch_object``)
binds the call, this front describes its tensors, the pipeline compiles --
and to report bad arguments.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .. import _core
from .._driver import learn_outputs as _learn, placement, pytree, signature as _signature
from .._driver.compiled import CompiledKernel
from .._driver.launch_object import BoundCall, LaunchObject, register_types
from .._driver.pipeline import Launcher
from . import _describe
from ._custom_op import custom_op

_is_compiling = torch.compiler.is_compiling  # dynamo folds it to True


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
                 dtypes: dict | None = None, **constexprs):
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
        self.launcher = Launcher(launcher, name=name, constexprs=constexprs,
                                 compile_options=compile_options,
                                 static_fallback=static_fallback, hint="torch",
                                 keeps_static_masks=True, dtypes=dtypes,
                                 # outputs by number are learned from the writes
                                 learns_writes=output_names is None and outputs > 0)
        self.fn, self.sig, self.name = launcher, self.launcher.sig, self.launcher.name
        self.num_outputs = outputs
        self.allocate = allocate
        self.params = self._open_params()
        self.output_params = self._output_params(output_names)
        self._outputs_named = output_names is not None  # else learned (learn_outputs)
        self._outputs_known = self._outputs_named  # allocate= merges by them
        self.launch = _core.TensorLauncher(self.name, [], self._on_miss)
        self.first_call = LaunchObject(self)  # binds, specializes, the entry
        self.dims = _describe.dims_from_option(dims, self.params)
        self.param_masks = _describe.masks_from_option(static, self.params)
        # What static= compiles in, per argument (each entry carries its own).
        self._option_masks = [self.param_masks.get(p.name, 0) for p in self.params] \
            if self.param_masks else None
        self._eager = self.launch if allocate is None else \
            (lambda *args: self._allocate_and_launch(args))
        self._op = custom_op(self)

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
        given = {k for k, _ in self.launcher.constexprs}
        return [p for p in self.sig.params
                if p.kind in (_signature.TENSOR, _signature.SCALAR)
                and p.name not in given]

    def _output_params(self, names) -> list[str]:
        """The parameters the kernel writes: `names`, else placed by the
        driver's rule (``placement.written_params``)."""
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
        return placement.written_params(self.sig, [index[p.name] for p in self.params],
                                        self.num_outputs, self.name)

    def _allocate_and_launch(self, args):
        outs = self.allocate(*args)
        single = isinstance(outs, torch.Tensor)
        outs = (outs,) if single else tuple(outs)
        if len(outs) != self.num_outputs:
            raise ValueError(f"cutecall: allocate of '{self.name}' returned "
                             f"{len(outs)} tensors, expected {self.num_outputs}")
        if not self._outputs_known:
            self._learn_before_merge(args, outs)
        self.launch(*self._merge(args, outs))
        return outs[0] if single else outs

    def _learn_before_merge(self, args, outs) -> None:
        """``allocate=`` merges the outputs into the call where they sit:
        before the first launch, a compile of the rule's merge tells where
        the kernel writes (``learn_outputs``), and the launch merges there."""
        self._outputs_known = True
        if not self.num_outputs or not self.sig.inspected:
            return
        try:
            self.compile(*self._merge(args, outs))
        except Exception:  # the launch raises the same error, from its own call
            pass

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

    # -- the description step (the launch object does the rest) --------------

    def bind(self, args) -> BoundCall:
        """A launcher-order call bound to the launcher's parameters."""
        binding, leaves = self.launcher.bind(args, is_array=_describe.is_tensor)
        return BoundCall(self.launcher, binding, leaves, len(args))

    def leaf_names(self, bound: BoundCall) -> list[str]:
        """Per tensor leaf, its name: ``x``, ``epilogue.mC``, ``arg2``."""
        names = [p.name for p in self.params] if self.sig.inspected else []
        arg = [names[k] if k < len(names) else f"arg{k}" for k in bound.binding.arrays]
        return [arg[a] + pytree.keystr(path) for a, path in bound.binding.leaves]

    def check(self, bound: BoundCall, launch: bool) -> str:
        """Raises, naming the argument and its value, for a tensor leaf no
        kernel takes (rank 0 or past MAX_RANK, a dtype without a CuTe DSL
        type) or, for a `launch`, no launch takes (not CUDA, on another
        device than the others); returns the arch of the tensors' device."""
        device = None
        for (a, path), nm, t in zip(bound.binding.leaves, self.leaf_names(bound),
                                    bound.arrays):
            what = f"argument {nm!r}" if self.sig.inspected or path else \
                f"argument {bound.binding.arrays[a]}"
            found = _describe.check_tensor(t, f"{what} of '{self.name}'", device,
                                           on_device=launch)
            device = device or found
        if launch and device is None:
            raise ValueError(f"cutecall: '{self.name}' was called without a "
                             "tensor; a launch runs on its tensors' device")
        return _describe.device_arch(device)

    def describe(self, bound: BoundCall, props, masks):
        """(operand descriptions, written operands) of a bound call whose
        tensor leaves have C++'s `props`, compiled with `masks` (and the
        user's ``static=``) in."""
        operands, written = [], []
        for i, (nm, t) in enumerate(zip(self.leaf_names(bound), bound.arrays)):
            per_dim = self.dims.get(nm)
            if per_dim is not None and len(per_dim) != t.dim():
                raise ValueError(f"cutecall: '{self.name}': dims[{nm!r}] names "
                                 f"{len(per_dim)} dims, but the tensor has rank "
                                 f"{t.dim()}")
            mask = self.param_masks.get(nm, 0) | masks[i]
            operands.append(_describe.describe(nm, i, t, props[i], mask, per_dim))
            if nm in self.output_params:
                if props[i].overlap:
                    raise ValueError(
                        f"cutecall: output '{nm}' of '{self.name}' (shape "
                        f"{tuple(t.shape)}, strides {tuple(t.stride())}) has elements "
                        "that several indices reach (an expand()ed or overlapping "
                        "as_strided view): the kernel's writes would race. Pass a "
                        "tensor that owns its elements (.contiguous() or .clone()).")
                written.append(i)
        return operands, written

    measure = staticmethod(_describe.tensor_props)

    def learn_outputs(self, result) -> bool:
        """After a compile: outputs given by number move to the parameters
        its trace saw the kernel write (``learn_outputs.learned_outputs``),
        and the custom op marks exactly those as mutated. True if they moved."""
        if self._outputs_named or not self.num_outputs:
            return False
        names = _learn.learned_outputs(self.launcher, result, self.params,
                                       self.num_outputs)
        if names is None or names == self.output_params:
            return False
        self.output_params = names
        self._op = custom_op(self)
        return True

    def specialize(self, args, props, arch: str):
        """(KernelSpec, per-leaf ``_core.ArgUse``) of a launcher-order call
        whose tensors have C++'s `props` (``_core.layout_props``), for
        `arch`: what the miss path compiles, without compiling. No device
        needed."""
        return self.first_call.spec(args, props, arch)

    @property
    def static_masks(self) -> list | None:
        """Per leaf of a call, the StaticMask the last static fallback (or
        ``static=``) compiled in; None when nothing is."""
        return self.first_call.static_masks or self._option_masks

    # -- the slow path: compile a specialization, or explain the error ------

    def _on_miss(self, args, props):
        _describe.check_kinds(self, args, (torch.Tensor,))
        if not any(isinstance(a, torch.Tensor) or pytree.is_container(a) for a in args):
            raise ValueError(f"cutecall: '{self.name}' was called without a "
                             "tensor; a launch runs on its tensors' device")
        register_types(self.launch, args, _describe.is_tensor)
        return self.first_call.entry(args, props)

    def compile(self, *args, arch: str | None = None) -> CompiledKernel:
        """Compiles (or finds in the artifact store) the specialization these
        arguments select, without launching. Needs no GPU.

        Example::

            k = cutecall.torch.kernel(vector_add)
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
            CUDA device, else CUDA device 0, else ``sm_90a``).

        Returns:
          The :class:`cutecall.CompiledKernel`. The first launch with
          tensors of the same layout classes finds it instead of compiling.
        """
        if self.allocate is not None and \
                len(args) == len(self.params) - self.num_outputs:
            outs = self.allocate(*args)
            outs = (outs,) if isinstance(outs, torch.Tensor) else tuple(outs)
            args = tuple(self._merge(args, outs))
        _describe.check_kinds(self, args, (torch.Tensor, _describe.TensorDesc))
        return self.first_call.compile(args, arch=arch)


# Eager calls skip __call__'s Python frame: C++ runs the same
# ``self._eager(*args)`` while torch is not compiling (``_core.set_eager_call``);
# torch.compile still reads and inlines ``__call__``.
_core.set_eager_call(Kernel, "_eager", torch.compiler, "_is_compiling_flag")


def kernel(launcher: Callable, *, outputs: int | Sequence[str] = 1,
           allocate: Callable | None = None, name: str | None = None,
           compile_options: str | None = None,
           static: bool | dict | None = None,
           static_fallback: bool | None = None, dims: dict | None = None,
           dtypes: dict | None = None, **constexprs: Any) -> Kernel:
    """Makes a ``@cute.jit`` launcher callable with torch tensors.

    Example::

        import torch, cutecall.torch
        from cutecall.examples.kernels import vector_add

        one_length = {"a": ("n",), "b": ("n",), "c": ("n",)}
        add = cutecall.torch.kernel(vector_add, dims=one_length)
        a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        out = torch.empty_like(a)
        add(a, b, out)                      # caller-allocated: returns None

        add2 = cutecall.torch.kernel(vector_add, dims=one_length,
                                     allocate=lambda a, b: torch.empty_like(a))
        out = add2(a, b)                    # the launch object allocates

    Args:
      launcher: a ``@cute.jit`` function taking the stream (a ``CUstream``
        parameter, or one named ``stream``; optional), ``cute.Tensor``
        parameters, runtime scalars annotated with a DSL type
        (``cutlass.Float32``...), and constexprs.
      outputs: how many tensor parameters the launcher writes (1), or
        their names. By number, they are the parameters the kernel writes,
        read from the DSL's trace at the first compile (``k.compile(...)``
        or the first call); before it, as cutecall's binding rule places
        them: tensor parameters without defaults right after the inputs,
        before any runtime scalars (QuACK's and FA4's convention). They are
        the ones ``torch.compile`` treats as mutated, and the ones
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
      dtypes: ``{parameter: dtype or tuple of dtypes}``: the element types
        the tensors must have (``torch.float32``, ``"bfloat16"``,
        ``cutlass.Float32``; a key may name a leaf, ``"epilogue.mC"``). A
        ``cute.Tensor`` carries no element type: without it a float32
        kernel given an int32 tensor compiles for it and runs; with it the
        call raises a ``TypeError`` naming the argument, its dtype and the
        declared one, before anything compiles.
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
                  static_fallback=static_fallback, dims=dims, dtypes=dtypes,
                  **constexprs)
