"""What a compile takes and gives: :class:`KernelSpec` (everything the
generated entry point bakes in) and :class:`CompiledKernel` (object bytes,
function prefix, launch plan). Plain immutable records, hashed by content;
no behaviour."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class KernelSpec:
    """Everything the generated entry point bakes in. Hashed by content key;
    handed to ``cutecall_entry`` as its Constexpr."""

    launcher: Callable
    constexprs: tuple
    operands: tuple
    num_inputs: int   # kernel tensor operands that are inputs (first ones)
    num_args: int     # XLA operands of the custom call
    num_rets: int     # XLA results of the custom call
    # pytree.Node trees: the call's INPUT arguments (arrays, runtime scalars,
    # None, compile-time values), and the kernel's outputs (None: aliased)
    input_tree: Any
    output_tree: Any
    key: str
    param_names: tuple = ()      # the launcher's positional parameters
    slots: tuple = ()            # slots.Binding.slots
    keyword_scalars: tuple = ()  # (keyword-only parameter, scalar index)
    scalar_types: tuple = ()     # runtime scalar types, slot order
    # (parameter, DSL type, Python value): annotated scalars left at their
    # default, passed as DSL values of their type
    scalar_defaults: tuple = ()
    symbols: tuple = ()          # tied-dim symbol names, index order
    binding: str = ""            # how the call reached the launcher (errors)
    target: Any = None           # target.Target: arch, device properties

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, KernelSpec) and other.key == self.key


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledKernel:
    """A compiled specialization: object bytes named by their SHA-256, the
    function prefix inside them and the launch plan. Immutable; equality and
    hash by content, so JAX's caches treat equal kernels as equal."""

    name: str
    key: str
    module: bytes
    sha256: str
    function: str
    plan: tuple
    operand_names: str
    symbol_names: str
    num_slots: int
    arch: str
    compile_seconds: float
    # what the kernel read of its device while traced, ((what, value), ...):
    # the target's answers (hardware.reads); a bundle checks them on load
    device_reads: tuple = ()
    # the ``_core.KernelEntry`` the compile validated (its plan parsed);
    # a launch object's entry reuses it. Not pickled, not compared.
    entry: object = dataclasses.field(default=None, repr=False)

    def __hash__(self):
        return hash((self.key, self.sha256))

    def __getstate__(self):
        return {**self.__dict__, "entry": None}

    def __eq__(self, other):
        return (isinstance(other, CompiledKernel) and other.key == self.key
                and other.sha256 == self.sha256)

    def __repr__(self):
        return (f"CompiledKernel({self.name}, sha256={self.sha256[:12]}, "
                f"{len(self.module)} bytes, {self.arch})")

    @property
    def plan_array(self) -> np.ndarray:
        return np.asarray(self.plan, dtype=np.int64)
