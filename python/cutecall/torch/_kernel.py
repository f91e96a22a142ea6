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

import weakref
from typing import Callable, Sequence

import torch

from .. import _core
from .._driver import pytree
from .._driver.call_leaves import register_types
from .._driver.compiled import CompiledKernel
from .._driver.launch_object import LaunchObject
from .._driver.operand import EVERYTHING, OperandDesc
from .._driver.pipeline import Launcher
from . import _describe
from ._custom_op import custom_op

_is_compiling = torch.compiler.is_compiling  # dynamo folds it to True


def explicit_static(masks, operands) -> str:
    """How a torch user asks for `masks` (the static fallback's warning
    quotes it): ``kernel(static=True)``, or ``static={parameter: ...}``."""
    if all(m == EVERYTHING for m in masks):
        return "cutecall.torch.kernel(..., static=True)"
    from .._driver.fallback import static_parts
    parts = [f"{op.name!r}: {True if all(e) else e}"
             for op, e in zip(operands, static_parts(masks, operands)) if any(e)]
    return "cutecall.torch.kernel(..., static={" + ", ".join(parts) + "})"


class Kernel:
    """A CuTe DSL launcher bound to torch tensors. Build with :func:`kernel`.

    ``k(*args)`` passes the launcher's tensor and runtime-scalar parameters
    positionally, in the launcher's order (the stream parameter and the
    constexprs given to :func:`kernel` excluded). Without ``allocate`` every
    tensor, outputs included, comes from the caller and the call returns
    None; with ``allocate`` the call omits the outputs and returns them.

    ``k.launch`` is the C++ launcher itself: the same call minus the
    ``torch.compile`` check, for the tightest eager loops (caller-allocated
    outputs only). Outputs, ``allocate``'s merge, ``static=`` and ``dims=``
    are the driver's launch object's (``first_call``); this class is its
    tensors' glue.
    """

    def __init__(self, launcher: Callable, *, outputs: int | Sequence[str] = 1,
                 allocate: Callable | None = None, name: str | None = None,
                 compile_options: str | None = None,
                 static: bool | dict | None = None,
                 static_fallback: bool | None = None, dims: dict | None = None,
                 dtypes: dict | None = None, **constexprs):
        if allocate is not None and not callable(allocate):
            raise TypeError(f"cutecall: allocate must be a callable returning the "
                            f"output tensors, got {allocate!r}")
        self.launcher = Launcher(launcher, name=name, constexprs=constexprs,
                                 compile_options=compile_options,
                                 static_fallback=static_fallback, hint=explicit_static,
                                 keeps_static_masks=True, dtypes=dtypes)
        self.fn, self.sig, self.name = launcher, self.launcher.sig, self.launcher.name
        self.allocate = allocate
        self.launch = _core.TensorLauncher(self.name, [], self._on_miss)
        # binds, asks where the outputs are, specializes, the entry
        self.first_call = LaunchObject(self, self.launcher, outputs=outputs, static=static,
                                       dims=dims)
        self.params, self.num_outputs = self.first_call.params, self.first_call.num_outputs
        self._eager = self.launch if allocate is None else \
            (lambda *args: self._allocate_and_launch(args))
        self._ops: dict = {}  # the custom op per output placement, once asked
        this = weakref.ref(self)  # torch's registry must not keep the kernel alive

        def placed_call(*args):
            return this()._placed_op(args)
        self._placed_call = torch.compiler.allow_in_graph(placed_call)
        self._built()

    def __call__(self, *args):
        if _is_compiling():  # the op marking the outputs, once they are known
            op = self._ops.get(tuple(self.output_params)) \
                if self.first_call.outputs_known else None
            return op(*args) if op is not None else self._placed_call(*args)
        return self._eager(*args)

    def __repr__(self):
        return (f"cutecall.torch.Kernel({self.name}, "
                f"{len(self.launch)} specialization(s))")

    @property
    def output_params(self) -> list[str]:
        """The parameters the kernel writes: named, or (outputs by number)
        where its trace saw writes, asked on the first call or compile;
        before that, where the binding rule puts them."""
        return self.first_call.output_params

    @property
    def static_masks(self) -> list | None:
        """Per leaf of a call, the StaticMask the last static fallback (or
        ``static=``) compiled in; None when nothing is."""
        return self.first_call.static_masks

    def _placed_op(self, args):
        """Under ``torch.compile`` before the op is built (run on its fake
        tensors: Dynamo writes this call into the graph, AOTAutograd traces
        it): the outputs are asked when nothing asked yet -- the first call
        of a program may be compiled -- then the custom op marking them is
        built and called."""
        if not self.first_call.outputs_known:
            merged = args
            if self.allocate is not None:
                outs = self.allocate(*args)
                merged = self.first_call.merge(
                    args, (outs,) if isinstance(outs, torch.Tensor) else tuple(outs))
            self.first_call.place(merged)
        return self._op(*args)

    def _built(self) -> None:
        """Builds the custom op once the outputs are known (named, or asked),
        so that Dynamo traces it straight into the graph."""
        if self.first_call.outputs_known:
            self._op  # noqa: B018 - built and kept in _ops

    @property
    def _op(self):
        """The ``torch.compile`` custom op, marking :attr:`output_params`
        mutated."""
        key = tuple(self.output_params)
        if key not in self._ops:
            self._ops[key] = custom_op(self)
        return self._ops[key]

    def _allocate_and_launch(self, args):
        outs = self.allocate(*args)
        single = isinstance(outs, torch.Tensor)
        outs = (outs,) if single else tuple(outs)
        if len(outs) != self.num_outputs:
            raise ValueError(f"cutecall: allocate of '{self.name}' returned "
                             f"{len(outs)} tensors, expected {self.num_outputs}")
        if not self.first_call.outputs_known:  # asked before the first launch
            self.first_call.place(self.first_call.merge(args, outs))
            self._built()
        self.launch(*self.first_call.merge(args, outs))
        return outs[0] if single else outs

    # -- the description step (the launch object does the rest) --------------

    is_array = staticmethod(_describe.is_tensor)
    measure = staticmethod(_describe.tensor_props)

    def check(self, bound, launch: bool) -> str:
        """Raises, naming the argument and its value, for a tensor leaf no
        kernel takes (rank 0 or past MAX_RANK, a dtype without a CuTe DSL
        type) or, for a `launch`, no launch takes (not CUDA, on another
        device than the others); returns the arch of the tensors' device."""
        from .._driver.launch_object import leaf_names
        device = None
        for (a, path), nm, t in zip(bound.binding.leaves, leaf_names(bound), bound.arrays):
            what = f"argument {nm!r}" if self.sig.inspected or path else \
                f"argument {bound.binding.arrays[a]}"
            found = _describe.check_tensor(t, f"{what} of '{self.name}'", device,
                                           on_device=launch)
            device = device or found
        if launch and device is None:
            raise ValueError(f"cutecall: '{self.name}' was called without a "
                             "tensor; a launch runs on its tensors' device")
        return _describe.device_arch(device)

    def describe(self, name: str, index: int, t, props, mask: int,
                 dims: tuple | None) -> OperandDesc:
        """Tensor leaf `index` with C++'s `props`, `mask` compiled in."""
        return _describe.describe(name, index, t, props, mask, dims)

    def spec_of(self, args, props, arch: str):
        """(KernelSpec, per-leaf ``_core.ArgUse``) of a launcher-order call
        whose tensors have C++'s `props` (``_core.layout_props``), for
        `arch`: what the miss path compiles, without compiling. No device
        needed."""
        return self.first_call.spec_of(args, props, arch)

    # -- the slow path: compile a specialization, or explain the error ------

    def _on_miss(self, args, props):
        _describe.check_kinds(self, args, (torch.Tensor,))
        if not any(isinstance(a, torch.Tensor) or pytree.is_container(a) for a in args):
            raise ValueError(f"cutecall: '{self.name}' was called without a "
                             "tensor; a launch runs on its tensors' device")
        register_types(self.launch, args, _describe.is_tensor)
        entry = self.first_call.entry(args, props)
        self._built()
        return entry

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
            if not self.first_call.outputs_known:
                self.first_call.place(self.first_call.merge(args, outs))
            args = tuple(self.first_call.merge(args, outs))
        _describe.check_kinds(self, args, (torch.Tensor, _describe.TensorDesc))
        compiled = self.first_call.compile(args, arch=arch)
        self._built()
        return compiled


# Eager calls skip __call__'s Python frame: C++ runs the same
# ``self._eager(*args)`` while torch is not compiling (``_core.set_eager_call``);
# torch.compile still reads and inlines ``__call__``.
_core.set_eager_call(Kernel, "_eager", torch.compiler, "_is_compiling_flag")
