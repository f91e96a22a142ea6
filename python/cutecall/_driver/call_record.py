"""What a compiled kernel records about how it is called, beyond its object
and plan: :class:`CallRecord` (a kernel with its name, runtime scalars and,
for JAX, its :class:`JaxContract`). Plain data, JSON-able, no framework
imported: bundles write and read these records in any process; the JAX
front's ``CompiledCall`` is a ``CallRecord`` that JAX can call."""

from __future__ import annotations

import dataclasses
import json

from .compiled import CompiledKernel

__all__ = ["CallRecord", "JaxContract", "TorchContract"]


@dataclasses.dataclass(frozen=True)
class JaxContract:
    """How a JAX call meets the kernel. JSON-able (bundle field ``jax``).

    ``outputs[j] = (dtype, shape)`` where ``shape`` is None (the caller gives
    ``output_shape_dtype``) or one entry per dim: an int, or ``(i, d)`` for
    "dim d of input i"."""

    inputs: tuple          # (dtype name, rank) per flat input array
    outputs: tuple         # (dtype name, shape rule or None) per flat output
    single_output: bool    # return outputs[0] rather than a tuple
    aliases: tuple         # (input, output) flat index pairs
    in_layouts: tuple      # XLA minor-to-major per input
    out_layouts: tuple     # XLA minor-to-major per output
    allow_cuda_graph: bool
    # how jax.vmap folds the call: the JAX front's BatchPlan as (inputs,
    # outputs, reason, explicit_loop); None: it loops
    batch: tuple | None = None

    def to_json(self) -> dict:
        return {
            "inputs": [list(x) for x in self.inputs],
            "outputs": [[dt, None if s is None else
                         [d if isinstance(d, int) else list(d) for d in s]]
                        for dt, s in self.outputs],
            "single_output": self.single_output,
            "aliases": [list(a) for a in self.aliases],
            "in_layouts": [list(x) for x in self.in_layouts],
            "out_layouts": [list(x) for x in self.out_layouts],
            "allow_cuda_graph": self.allow_cuda_graph,
            **({} if self.batch is None else {"batch": [
                list(self.batch[0]), list(self.batch[1]), self.batch[2], self.batch[3]]}),
        }

    @classmethod
    def from_json(cls, doc: dict) -> "JaxContract":
        """Raises KeyError/TypeError/ValueError on a malformed document."""
        def rule(s):
            if s is None:
                return None
            return tuple(int(d) if isinstance(d, int) else
                         (int(d[0]), int(d[1])) for d in s)
        return cls(
            inputs=tuple((str(dt), int(r)) for dt, r in doc["inputs"]),
            outputs=tuple((str(dt), rule(s)) for dt, s in doc["outputs"]),
            single_output=bool(doc["single_output"]),
            aliases=tuple((int(a), int(b)) for a, b in doc["aliases"]),
            in_layouts=tuple(tuple(int(d) for d in x) for x in doc["in_layouts"]),
            out_layouts=tuple(tuple(int(d) for d in x)
                              for x in doc["out_layouts"]),
            allow_cuda_graph=bool(doc["allow_cuda_graph"]),
            batch=_batch(doc.get("batch")))


@dataclasses.dataclass(frozen=True)
class TorchContract:
    """How a torch launch object's call meets the kernel (a recipe's torch
    variant, ``_driver.recipe``). JSON-able (record field ``torch``).

    ``params``: the launcher's parameters a call fills, ``(name, kind,
    scalar type or None)`` each (the ``torch.compile`` op's schema);
    ``outputs``: the ones the kernel writes; ``out_positions``: where
    ``allocate``'s outputs sit in the launcher-order call; ``uses``: per
    leaf of that call, ``(UseKind name, index, ScalarType name or None,
    compile-time value)`` as C++ reads it; ``masks``: per leaf, the
    StaticMask compiled in; ``tensors``: per tensor leaf, the layout facts
    C++ keys a specialization by: ``(dtype, rank, align, unit dim, wide,
    extent classes, stride classes)``."""

    params: tuple
    outputs: tuple
    out_positions: tuple
    uses: tuple
    masks: tuple
    tensors: tuple

    def to_json(self) -> dict:
        return {"params": [list(p) for p in self.params], "outputs": list(self.outputs),
                "out_positions": list(self.out_positions),
                "uses": [list(u) for u in self.uses], "masks": list(self.masks),
                "tensors": [[dt, r, a, u, w, list(e), list(s)]
                            for dt, r, a, u, w, e, s in self.tensors]}

    @classmethod
    def from_json(cls, doc: dict) -> "TorchContract":
        """Raises KeyError/TypeError/ValueError on a malformed document."""
        return cls(
            params=tuple((str(n), str(k), None if t is None else str(t))
                         for n, k, t in doc["params"]),
            outputs=tuple(str(n) for n in doc["outputs"]),
            out_positions=tuple(int(i) for i in doc["out_positions"]),
            uses=tuple((str(k), int(i), None if t is None else str(t), v)
                       for k, i, t, v in doc["uses"]),
            masks=tuple(int(m) for m in doc["masks"]),
            tensors=tuple((str(dt), int(r), int(a), int(u), bool(w),
                           tuple(int(x) for x in e), tuple(int(x) for x in s))
                          for dt, r, a, u, w, e, s in doc["tensors"]))


def _batch(doc) -> tuple | None:
    """A vmap declaration from JSON: (inputs, outputs, reason,
    explicit_loop); a malformed one raises ValueError."""
    if doc is None:
        return None
    inputs, outputs, reason, explicit = doc
    dims = [None if d is None else int(d) for d in inputs]
    return (tuple(dims), tuple(int(d) for d in outputs),
            None if reason is None else str(reason), bool(explicit))


@dataclasses.dataclass(frozen=True)
class CallRecord:
    """A compiled kernel as a bundle records it: its exported name, the
    :class:`CompiledKernel`, its runtime scalars (``(name, CuTe DSL type)``
    each) and its JAX call contract (None: callable from C++ and PyTorch
    only)."""

    name: str
    kernel: CompiledKernel
    scalars: tuple = ()
    contract: JaxContract | None = None


def record_of_entry(e) -> CallRecord:
    """A verified bundle entry (``_core.read_bundle``'s ``BundleEntry``) as a
    :class:`CallRecord`; a malformed call contract raises ValueError naming
    the field."""
    kernel = CompiledKernel(
        name=e.kernel, key=e.key, module=e.module, sha256=e.sha256,
        function=e.function, plan=tuple(e.plan), operand_names=e.operand_names,
        symbol_names=e.symbol_names, num_slots=e.num_slots, arch=e.arch,
        compile_seconds=0.0, device_reads=tuple(e.device_reads))
    scalars = tuple((n, t) for n, t in zip(e.scalar_names, e.scalar_types) if t != "?")
    contract = None
    if e.jax:
        try:
            contract = JaxContract.from_json(json.loads(e.jax))
        except (ValueError, KeyError, TypeError, IndexError) as err:
            raise ValueError(f"field 'jax' is not a cutecall call contract: {err}") from None
    return CallRecord(e.name, kernel, scalars, contract)
