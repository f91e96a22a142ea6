"""A launch object's outputs, learned from what its kernel writes.

torch's ``kernel(outputs=n)`` names no parameters: after a compile the
outputs become the parameters its trace saw written
(``written_params``), so the custom op ``torch.compile`` traces through
marks exactly those as mutated. A kernel a cache held was never traced in
this process: :func:`trace_writes` traces it (the DSL's passes do not run).
"""

from __future__ import annotations

from collections import OrderedDict

from .. import compiler, target
from . import placement, writes as written_params
from ..compile_error import CompileError
from ..store import memory
from .writes import ParamWrites


# What each compiled kernel writes, by its spec's content key: every launch
# object of one kernel shares one trace (a new launch object for a kernel
# the compile cache holds would otherwise trace it again, ~10 ms). Bounded:
# the least recently used entry goes first.
_WRITES_BY_KEY: "OrderedDict[str, ParamWrites]" = OrderedDict()
_WRITES_BY_KEY_MAX = 1024
# The outputs each placement question was answered with (spec key, open
# parameters, outputs, written parameters): a new launch object of a
# learned kernel places its outputs without ranking the placements again
# (~60 us of a ~450 us miss). Bounded like the writes.
_PLACED: "OrderedDict[tuple, list | None]" = OrderedDict()


def _bounded_put(cache: OrderedDict, key, value) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _WRITES_BY_KEY_MAX:
        cache.popitem(last=False)


def _remembered(key: str, writes: ParamWrites | None) -> ParamWrites | None:
    """`writes` recorded under `key` (when given), else what was recorded."""
    if writes is not None:
        _bounded_put(_WRITES_BY_KEY, key, writes)
        return writes
    found = _WRITES_BY_KEY.get(key)
    if found is not None:
        _WRITES_BY_KEY.move_to_end(key)
    return found


def trace_writes(spec, name: str, options: str, arch: str) -> ParamWrites | None:
    """What `spec`'s kernel writes, from a trace alone (the DSL's passes do
    not run): for a kernel a cache held. None when the trace fails or says
    nothing."""
    with written_params.observing(check=False) as obs, memory.lock:
        obs.stop = True
        try:
            compiler.compile_kernel(spec, name, options, arch)
        except written_params.OutputsElsewhere:
            pass
        except CompileError:
            return None
    return obs.writes


def learned_outputs(launcher, result, params, num_outputs: int) -> list[str] | None:
    """The `num_outputs` parameters among `params` (the open ones, in
    order) that a launch object's outputs are, learned from what the kernel
    of `result` (a ``pipeline.Specialization``) writes: its trace, or the
    launcher's last one, or what another launch object of the same kernel
    learned (by the spec's content key), or -- for a kernel a cache held,
    when this process has traced none -- a trace now. None when the evidence says nothing or
    fits several placements equally (the rule stays)."""
    writes = _remembered(result.spec.key, result.writes or launcher.writes)
    if writes is None:
        options, arch = target.resolve_options(launcher.options, result.kernel.arch)
        writes = trace_writes(result.spec, launcher.name, options, arch)
        launcher.writes = _remembered(result.spec.key, writes)
    if writes is None or writes.unattributed or not writes.candidates or \
            not launcher.sig.inspected:
        return None
    asked = (result.spec.key, tuple(p.name for p in params), num_outputs,
             writes.candidates, writes.in_leaves)
    if asked in _PLACED:
        _PLACED.move_to_end(asked)
        found = _PLACED[asked]
        return None if found is None else list(found)
    index = {p.name: i for i, p in enumerate(launcher.sig.params)}
    try:
        found = placement.written_params(launcher.sig, [index[p.name] for p in params],
                                         num_outputs, launcher.name, writes.candidates,
                                         writes.in_leaves)
    except (TypeError, ValueError):
        found = None
    _bounded_put(_PLACED, asked, None if found is None else tuple(found))
    return found
