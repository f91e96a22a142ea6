"""A launch object's outputs, learned from what its kernel writes.

torch's ``kernel(outputs=n)`` names no parameters: after a compile the
outputs become the parameters its trace saw written
(``written_params``), so the custom op ``torch.compile`` traces through
marks exactly those as mutated. A kernel a cache held was never traced in
this process: :func:`trace_writes` traces it (the DSL's passes do not run).
"""

from __future__ import annotations

from . import compiler, placement, target, written_params
from .compile_error import CompileError
from .store import memory
from .written_params import ParamWrites


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
    launcher's last one, or -- for a kernel a cache held, when this process
    has traced none -- a trace now. None when the evidence says nothing or
    fits several placements equally (the rule stays)."""
    writes = result.writes or launcher.writes
    if writes is None:
        options, arch = target.resolve_options(launcher.options, result.kernel.arch)
        writes = launcher.writes = trace_writes(result.spec, launcher.name, options, arch)
    if writes is None or writes.unattributed or not writes.candidates or \
            not launcher.sig.inspected:
        return None
    index = {p.name: i for i, p in enumerate(launcher.sig.params)}
    try:
        return placement.written_params(launcher.sig, [index[p.name] for p in params],
                                        num_outputs, launcher.name, writes.candidates)
    except (TypeError, ValueError):
        return None
