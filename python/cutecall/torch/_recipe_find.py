"""The torch front's recipe lookups: a call of ``cutecall.torch.kernel(build,
recipe=...)`` described (its leaves as C++ reads them: tensors by dtype and
rank, scalars by type, None, compile-time values by content), keyed
(``_driver.recipe.recipe_key``) and matched to a recorded variant whose
torch contract (``_driver.call_record.TorchContract``) the call meets: the
same leaves, each tensor of the layout classes C++ keys a specialization by
(alignment, unit-stride dim, 64-bit extents, divisibility classes), the
kernel's static extents and compile-time values equal. Imports neither the
CuTe DSL nor the kernel's library.
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import _core
from .._driver import pytree, recipe as _recipe, target as _target
from .._driver.call_record import TorchContract
from .._driver.dtypes import dtype_name
from .._driver.fingerprint import fingerprint
from . import _describe

_NUMBERS = (bool, int, float)
_JSON_CONSTS = (bool, int, float, str, type(None))


def describe(args: Sequence) -> tuple[list, list]:
    """(JSON description for the key, per C++ leaf its value) of a
    launcher-order call: each argument one leaf, a container its leaves
    depth first (``pytree.flatten``'s order: the one C++ reads)."""
    desc, leaves = [], []
    for a in args:
        if pytree.is_container(a) and not _describe.is_tensor(a):
            scalars: list = []

            def on_scalar(path, value, scalar_type):
                scalars.append(value)
                return len(scalars) - 1
            node, found = pytree.flatten(a, _describe.is_tensor, on_scalar)
            arrays = iter(v for _, v in found)
            values = []
            for leaf in (node.leaves() if isinstance(node, pytree.Node) else (node,)):
                values.append(next(arrays) if leaf.kind == pytree.ARRAY else
                              scalars[leaf.value] if leaf.kind == pytree.SCALAR else
                              leaf.value)
            desc.append(["tree", node.key(lambda v, what: fingerprint(v, what)),
                         [_leaf(v) for v in values]])
            leaves.extend(values)
        else:
            desc.append(_leaf(a))
            leaves.append(a.value if pytree.dsl_scalar_type(a) else a)
    return desc, leaves


def call_desc(args: Sequence, outs: Sequence = ()) -> list:
    """A call as the key describes it: its arguments, then the outputs
    ``allocate`` made (by dtype and rank)."""
    return describe(args)[0] + [["out", *d[1:]] for d in describe(outs)[0]]


def merge(args: Sequence, outs: Sequence, positions: Sequence[int]) -> list:
    """The launcher-order call: `outs` at `positions`, `args` in between."""
    merged, a, o = [], iter(args), iter(outs)
    at = set(positions)
    for i in range(len(args) + len(outs)):
        merged.append(next(o) if i in at else next(a))
    return merged


def _leaf(x) -> Any:
    """One leaf as JSON: a tensor by dtype and rank, a number or DSL scalar
    by type, None, anything else by content."""
    if x is None:
        return None
    if _describe.is_tensor(x):
        return ["tensor", dtype_name(x.dtype), x.dim()]
    st = pytree.dsl_scalar_type(x)
    if st is not None:
        return ["scalar", st]
    if isinstance(x, _NUMBERS):
        return ["number", type(x).__name__]
    return ["const", fingerprint(x, "a compile-time argument")]


def layout_of(t) -> tuple:
    """What C++ keys a tensor's specialization by: ``(dtype, rank, align,
    unit dim, wide, extent classes, stride classes)``."""
    p = _describe.tensor_props(t)
    return (dtype_name(t.dtype), t.dim(), int(p.align), int(p.unit_dim), bool(p.wide),
            tuple(int(c) for c in p.extent_classes), tuple(int(c) for c in p.stride_classes))


def operands(contract: TorchContract, leaves: Sequence) -> list | None:
    """The call's tensors in operand order when it meets `contract` (its
    leaves reach the plan as recorded, each tensor of the recorded layout
    classes, each compile-time value equal); None when it does not."""
    if len(contract.uses) != len(leaves):
        return None
    found: dict = {}
    for (kind, index, _st, value), x in zip(contract.uses, leaves):
        if kind in ("TENSOR", "OUTPUT"):
            if not _describe.is_tensor(x) or index in found:
                return None
            if kind == "OUTPUT" and _describe.tensor_props(x).overlap:
                return None  # the full path names the racing output
            found[index] = x
        elif kind == "SCALAR" and not (isinstance(x, _NUMBERS) or _describe.is_tensor(x)):
            return None
        elif kind == "CONST" and (type(x) is not type(value) or x != value):
            return None
    if sorted(found) != list(range(len(contract.tensors))):
        return None
    tensors = [found[i] for i in range(len(found))]
    if any(layout_of(t) != rec for t, rec in zip(tensors, contract.tensors)):
        return None
    return tensors


def contract_of(entry, kernel_params, outputs, out_positions, leaves) -> TorchContract | None:
    """The torch contract of a full-path launch: `entry` (the
    ``_core.KernelEntry`` it registered), the launch object's parameters
    and outputs, and the call's `leaves`; None when a compile-time leaf is
    not JSON (such a call is not recorded)."""
    uses, tensors = [], {}
    for u, x in zip(entry.uses, leaves):
        kind = _core.UseKind(u.kind).name
        if kind == "CONST" and not isinstance(u.value, _JSON_CONSTS):
            return None
        st = _core.ScalarType(u.scalar_type).name if kind == "SCALAR" else None
        uses.append((kind, int(u.index), st, u.value if kind == "CONST" else None))
        if kind in ("TENSOR", "OUTPUT"):
            tensors[int(u.index)] = layout_of(x)
    if len(uses) != len(leaves) or sorted(tensors) != list(range(len(tensors))):
        return None
    masks = list(entry.static_masks) or [0] * len(leaves)
    return TorchContract(
        params=tuple((p.name, p.kind, p.scalar_type) for p in kernel_params),
        outputs=tuple(outputs), out_positions=tuple(out_positions), uses=tuple(uses),
        masks=tuple(masks), tensors=tuple(tensors[i] for i in range(len(tensors))))


class TorchRecipe:
    """The recipe side of one ``cutecall.torch.kernel(build, recipe=...)``:
    `values` (the caller's recipe), `site` (the kernel's options as a
    fingerprint), `packages` (the kernel's distributions)."""

    def __init__(self, values, *, name: str, site: Any, packages: Sequence[str],
                 compile_options: str | None):
        fingerprint(values, "recipe")  # fail early on values without content
        self.values, self.name, self.site = values, name, site
        self.packages, self.compile_options = tuple(packages), compile_options
        self._variants = _recipe.VariantCache("torch")

    def target(self, arch: str | None):
        """The target a call on a device of `arch` compiles for."""
        return _target.resolve(self.compile_options, arch)

    def key_of(self, desc, target) -> str:
        return _recipe.recipe_key(self.values, name=self.name,
                                  call=["torch", self.site, desc],
                                  target=target.key(), packages=self.packages)

    def find(self, args: Sequence, outs: Sequence, arch: str | None):
        """(recipe key, Variant, CompiledKernel, target) of the recorded
        kernel a call meets (a store's record, else a pack), or (key, None,
        None, target): a miss. `args`: the call as made; `outs`: the
        outputs ``allocate`` made for it (merged per the record); `arch`:
        the tensors' device's (None: the default target)."""
        target = self.target(arch)
        key = self.key_of(call_desc(args, outs), target)
        for variant, kernel in self.candidates(key, target.arch):
            if len(variant.torch.out_positions) != len(outs):
                continue
            leaves = describe(merge(args, outs, variant.torch.out_positions))[1]
            tensors = operands(variant.torch, leaves)
            if tensors is None:
                continue
            kernel = kernel or _load(variant, target.arch)
            if kernel is None or not _recipe.fits(
                    kernel, [(tuple(t.shape), tuple(t.stride())) for t in tensors]):
                continue
            _recipe.used(key, target.arch, variant)
            return key, variant, kernel, target
        return key, None, None, target

    def candidates(self, key: str, arch: str) -> list:
        """(Variant, kernel or None: load it) pairs under recipe `key` with
        a torch contract: the stores' record, else the packs' entries."""
        return self._variants.get(key, arch)

    def record(self, key: str, arch: str, kernel, contract: TorchContract) -> None:
        """After a full-path launch: what it compiled, under its recipe key."""
        _recipe.add(key, arch, _recipe.Variant(kernel.key, kernel.name, (), None, contract))
        self._variants.forget(key)


def _load(variant, arch: str):
    from .._driver.store import memory
    return memory.load(variant.key, variant.name, arch)
