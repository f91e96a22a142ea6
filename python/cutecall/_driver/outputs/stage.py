"""Output placement, one stage of the driver: where a call's outputs sit
when it names none.

``pipeline.Launcher.bind`` asks :func:`place` once per call that names no
outputs, before anything compiles; it returns one binding::

    binding, leaves = place(launcher, call, describe)

The question is asked with traces that stop before the DSL's passes
(``compiler.trace_kernel``; a trace that passes is no compile), in a
bounded loop (``probes``): the rule places the outputs (``placement``),
a trace of that binding tells what the kernel writes (``writes``), and the
outputs move to the parameters written, or the next placement is traced
when that one failed or wrote nothing. `describe(binding, leaves)` is the
front's description of a binding's arrays (``operand.Description``).

The answer is remembered by the spec key of the call as the rule binds it,
and what the kernel writes by the launcher's content (``Launcher.content``),
so a later call -- of this call site or another of the same kernel --
places its outputs there without a trace. A call whose outputs are among
its arguments (a launch object's) is traced once: its outputs are the
parameters written (``Binding.written``).

Where the analysis cannot account for the writes -- the kernel stores
through inline PTX at an address it lost, and an output is written by
nothing it saw -- the call is refused, naming the kernel and its tensor
parameters: the user names the outputs. No framework; the CuTe DSL only
inside a trace.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Callable

from .. import compiler, diagnosis, fallback_climb, target
from ..binding import Call
from ..compile_error import CompileError
from ..signature import TENSOR
from ..slots import Binding
from ..store import memory
from . import writes
from .placement import Evidence
from .probes import MAX_ROUNDS, Probes, outputs_at
from .writes import ParamWrites

_MAX = 1024  # answers and writes kept (least recently used go first)


@dataclasses.dataclass(frozen=True)
class Answer:
    """Where a question put the outputs (parameter names, output order),
    what the trace behind it wrote (None: no trace said) and what each
    placement tried taught (``probes.Probes``)."""

    outputs: tuple
    writes: ParamWrites | None
    probes: Probes


# Answers by the spec key of the call as the rule binds it, and what each
# launcher's kernel writes by the launcher's content.
_ANSWERS: "OrderedDict[str, Answer]" = OrderedDict()
_WRITES: "OrderedDict[str, ParamWrites]" = OrderedDict()
_LAST: "OrderedDict[str, Answer]" = OrderedDict()  # per launcher content
# A launch object's outputs among the parameters written, by (launcher
# content, outputs, writes): a new launch object of a learned kernel does
# not rank the placements again (about 60 us of its ~450 us miss).
_AMONG: "OrderedDict[tuple, tuple]" = OrderedDict()


_lock = threading.Lock()  # the caches' (first calls may come from many threads)


def _put(cache: OrderedDict, key, value) -> None:
    with _lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _MAX:
            cache.popitem(last=False)


def _get(cache: OrderedDict, key):
    """`key`'s value (now the most recently used), or None."""
    with _lock:
        found = cache.get(key)
        if found is not None:
            cache.move_to_end(key)
        return found


def known_writes(launcher) -> ParamWrites | None:
    """What a trace saw `launcher`'s kernel write (by its content), if one
    did."""
    return _get(_WRITES, launcher.content)


def forget() -> None:
    """Forgets every answer and what every kernel writes (tests; as a new
    process would)."""
    with _lock:
        for cache in (_ANSWERS, _WRITES, _LAST, _AMONG):
            cache.clear()


def last_answer(launcher) -> Answer | None:
    """The answer the last question about `launcher`'s kernel got (by its
    content; None: none was asked)."""
    return _get(_LAST, launcher.content)


def place(launcher, call: Call, describe: Callable) -> tuple[Binding, list]:
    """The binding of `call`, whose outputs `launcher` places where its
    kernel writes (module docstring), and the array leaves' values."""
    return _Question(launcher, call, describe).answer()


class _Question:
    """One call's placement question."""

    def __init__(self, launcher, call: Call, describe: Callable):
        self.launcher, self.call, self.describe = launcher, call, describe

    def answer(self) -> tuple[Binding, list]:
        hint = _get(_WRITES, self.launcher.content)
        if hint is not None and self.call.outputs_in_call:  # the writes are known
            return self.launcher.bind_as(self.call, output_names=self.among(hint))
        if hint is not None:  # the kernel's writes are known: placed there
            binding, leaves = self.launcher.bind_as(
                self.call, evidence=Evidence(hint.candidates, hint.in_leaves))
            names = self.outputs(binding)
            if not hint.contradicts(names) and not hint.unaccounted(names):
                return binding, leaves
        rule, leaves = self.launcher.bind_as(self.call)
        key = self.spec(rule, leaves).key
        found = _get(_ANSWERS, key)
        if found is None:
            earlier = memory.failure(key)
            if earlier is not None:  # the same call failed: no trace again
                raise earlier
            try:
                found = self.ask(rule, leaves)
            except CompileError as e:
                memory.remember_failure(key, e)
                raise
            _put(_ANSWERS, key, found)
            _put(_LAST, self.launcher.content, found)
            if found.writes is not None and found.writes.candidates:
                _put(_WRITES, self.launcher.content, found.writes)
        return self.launcher.bind_as(self.call, output_names=found.outputs)

    def outputs(self, binding: Binding) -> tuple:
        """The parameters a binding makes the outputs."""
        if self.call.outputs_in_call:
            return tuple(binding.written)
        params = self.launcher.sig.params
        return tuple(params[i].name for i in outputs_at(binding))

    def spec(self, binding: Binding, leaves, extra=None):
        d = self.describe(binding, leaves)
        return self.launcher.spec(d.operands, binding, device_arch=d.device_arch,
                                  output_tree=d.output_tree, num_args=d.num_args,
                                  num_rets=d.num_rets, extra=extra)

    def trace(self, binding: Binding, leaves, searched: bool) -> fallback_climb.Traced:
        """What the kernel writes with the outputs where `binding` puts
        them: the static forms the compile would climb, each traced."""
        d = self.describe(binding, leaves)
        launcher = self.launcher
        options, arch = target.resolve_options(launcher.options, d.device_arch)
        start = (0,) * len(d.operands)
        traced = fallback_climb.climb_traces(
            lambda masks: self.spec(binding, leaves, masks), d.operands, start,
            name=launcher.name, options=options, arch=arch,
            fallback=launcher.static_fallback, searched=searched,
            trace=lambda spec: _trace(spec, launcher.name, options, arch))
        if traced.error is not None:
            traced = dataclasses.replace(
                traced, error=diagnosis.annotate(traced.error, d.operands, launcher.history))
        return traced

    def ask(self, binding: Binding, leaves) -> Answer:
        """Traces placements until one is where the kernel writes (module
        docstring; ``probes`` bounds it)."""
        probes, found = Probes(), None
        for _ in range(MAX_ROUNDS):
            outs, names = outputs_at(binding), self.outputs(binding)
            if probes.empty_done or probes.read_only_done:
                return Answer(names, found, probes)  # the rule's, unchecked
            if found is not None and all(n in found.candidates for n in names):
                return Answer(names, found, probes)
            if outs in probes.failed:  # the placements ran out
                raise self.refused(probes)
            traced = self.trace(binding, leaves, probes.searched(outs))
            if traced.error is not None and self.call.outputs_in_call:
                raise traced.error  # every tensor where the call put it: its error
            if traced.error is not None:
                if not probes.did_not_trace(outs, traced.error, traced.last):
                    raise self.refused(probes)
            elif traced.value is None:  # the trace says nothing: the rule stands
                return Answer(names, None, probes)
            elif self.call.outputs_in_call:  # one trace: the outputs where written
                return self.written_answer(traced.value, probes)
            else:
                self.refuse_unaccounted(traced.value, names)
                if traced.value.contradicts(names):
                    found = traced.value
                    probes.read_only(outs)
                elif traced.value.empty and probes.check_empty(binding):
                    probes.wrote_nothing(outs)
                else:
                    return Answer(names, traced.value, probes)
            binding, leaves = self.launcher.bind_as(self.call, evidence=Evidence(
                found.candidates if found else None, found.in_leaves if found else frozenset(),
                frozenset(probes.avoid), probes.apart_from))
        return Answer(self.outputs(binding), found, probes)

    def written_answer(self, found: ParamWrites, probes: Probes) -> Answer:
        """A launch object's outputs: the parameters written."""
        names = self.among(found)
        self.refuse_unaccounted(found, names)
        return Answer(names, found, probes)

    def among(self, found: ParamWrites) -> tuple:
        """A launch object's outputs among the parameters `found` written
        (``placement.written_params``), ranked once per kernel and writes."""
        key = (self.launcher.content, self.call.num_outputs, found.candidates,
               found.in_leaves)
        names = _get(_AMONG, key)
        if names is None:
            binding, _ = self.launcher.bind_as(self.call, evidence=Evidence(
                found.candidates, found.in_leaves))
            names = tuple(binding.written)
            _put(_AMONG, key, names)
        return names

    def refuse_unaccounted(self, found: ParamWrites, names: tuple) -> None:
        """Raises when the outputs of a placement are written by nothing
        the analysis saw while the kernel stores where it cannot tell."""
        if not found.unaccounted(names):
            return
        tensors = [p.name for p in self.launcher.sig.params if p.kind == TENSOR]
        raise ValueError(
            f"cutecall: kernel '{self.launcher.name}' stores through inline PTX at an "
            "address its trace does not tie to a parameter, so where it writes its "
            f"outputs cannot be told (the rule would put them at "
            f"{', '.join(names)}). Name them: output_params=(...) in JAX, "
            f"outputs=(...) in torch; its tensor parameters are {', '.join(tensors)}.")

    def refused(self, probes: Probes) -> CompileError:
        """The rule's trace error, noting that other placements failed too
        (a note where Python has them, 3.11+)."""
        error = probes.first_error
        if hasattr(error, "add_note"):
            error.add_note(
                f"cutecall: {len(probes.failed)} placement(s) of the outputs of "
                f"'{self.launcher.name}' were traced and none passed; if the outputs "
                "are not where the rule puts them, name them: output_params=(...) in "
                "JAX, outputs=(...) in torch.")
        return error


def _trace(spec, name: str, options: str, arch: str) -> ParamWrites | None:
    """What `spec`'s kernel writes, from a trace alone (the DSL's passes
    never run); a trace that fails is counted with the compiles, as the
    DSL run that failed it is."""
    try:
        return compiler.trace_kernel(spec, name, options, arch, writes.reader(spec))
    except CompileError:
        memory.count_failed_trace()
        raise
