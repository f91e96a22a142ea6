"""ejkernel's ``cute_call(*args, call=, out_shape=, out=, name=, device=)``,
run by cutecall: placement checks (``device=``, ``shard_map`` detected from
the trace's abstract mesh), the named call cache -- a bounded LRU keyed on
the call's *content* (code, closure values, static parameters) as well as
its name, so a name that misses a parameter can never hand back another
kernel (ejkernel keys on the name alone) -- and the output contract
(``_ejkernel_outputs``: the result's leaves checked and put in the tree of
``out`` or ``out_shape``)."""

from __future__ import annotations

import collections
import math
import threading
from typing import Any, Callable, Sequence

import jax

from ._ejkernel_ffi import _require_dsl
from ._ejkernel_keys import arg_key as _arg_key, content_key as _content_key
from ._ejkernel_outputs import OutputContract

_Tracer = jax.core.Tracer

# -- the named call cache ----------------------------------------------------------

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


# -- cute_call ----------------------------------------------------------------------

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
