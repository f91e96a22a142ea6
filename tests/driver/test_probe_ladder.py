"""How many forms a placement probe compiles (issue 37): a placement tried
after the rule's failed climbs its dynamic and guided forms only, unless
the DSL asks for a value known at trace time; a store of the wrong element
type ends any climb; when no probe compiled, every placement is climbed
again with every form. No DSL: the compile is replaced by one that fails
with a chosen cause and counts its calls."""

from __future__ import annotations

import itertools
import types

import pytest

from cutecall._driver import fallback, pipeline
from cutecall._driver.outputs import writes as written_params
from cutecall._driver.binding import Binding, Slot, SlotKind
from cutecall._driver.compile_error import CompileError
from cutecall._driver.store import memory

OPERANDS = [types.SimpleNamespace(name=n, shape=(1000, 64)) for n in ("x", "out")]
FORMS = 1 + len(fallback.search([op.shape for op in OPERANDS]))
_unique = itertools.count()


def _climb(monkeypatch, cause: str, searched: bool) -> int:
    tried = []
    run = next(_unique)  # keys of their own: no rejection remembered from another test

    def failing(spec, name, options, arch):
        tried.append(spec.key)
        raise CompileError("no", kernel=name, arch=arch, root_cause=cause)
    monkeypatch.setattr(memory, "get_locked", failing)
    build = lambda masks: types.SimpleNamespace(key=f"probe-{run}-{masks}")  # noqa: E731
    with pytest.raises(CompileError):
        fallback.climb(build, OPERANDS, (0, 0), "k", "", "sm_90a", True,
                       lambda masks: "", searched)
    return len(set(tried))


def test_the_rules_placement_climbs_every_form(monkeypatch, fresh_key_space):
    assert FORMS > 2
    assert _climb(monkeypatch, "Operation creation failed", True) == FORMS


def test_a_probe_compiles_its_dynamic_form_only(monkeypatch, fresh_key_space):
    assert _climb(monkeypatch, "Operation creation failed", False) == 1


def test_a_probe_the_dsl_asks_to_make_static_climbs(monkeypatch, fresh_key_space):
    cause = ("`const_expr()` requires a value known at code-read time, but you "
             "gave it a Runtime value (Staged value). (at jsd.py:327)")
    assert _climb(monkeypatch, cause, False) == FORMS


def test_a_store_of_the_wrong_element_type_ends_the_climb(monkeypatch, fresh_key_space):
    cause = "ValueError: type mismatch, store f32 to Int32 (at bsa_fwd_sm90.py:315)"
    assert _climb(monkeypatch, cause, True) == 1


def test_a_form_rejected_earlier_for_its_element_type_ends_a_later_climb(
        monkeypatch, fresh_key_space):
    # The same call site's climb again in the process (another launch object
    # of the kernel, the same placement): the remembered rejection keeps its
    # cause, so the climb ends where the first one did -- no DSL run, no
    # other form (it used to climb one guided form further: an 8th DSL run
    # for cuDNN's block-sparse attention after the other cuDNN tests).
    tried = []
    cause = "ValueError: type mismatch, store f32 to Int32 (at bsa_fwd_sm90.py:315)"

    def failing(spec, name, options, arch):
        tried.append(spec.key)
        raise CompileError("no", kernel=name, arch=arch, root_cause=cause,
                           source_line="bsa_fwd_sm90.py:315: x.shape[0]")
    monkeypatch.setattr(memory, "get_locked", failing)
    run = next(_unique)
    build = lambda masks: types.SimpleNamespace(key=f"again-{run}-{masks}")  # noqa: E731
    for _ in range(2):
        with pytest.raises(CompileError):
            fallback.climb(build, OPERANDS, (0, 0), "k", "", "sm_90a", True,
                           lambda masks: "", False)
    assert tried == [f"again-{run}-(0, 0)"]


def _kernel(stream, a, b, c, d, e, f, g, h, i, j):
    pass


def _binding(outs) -> Binding:
    slots = [Slot(SlotKind.STREAM)] + [Slot(SlotKind.INPUT, 0)] * 10
    for k, i in enumerate(outs):
        slots[i] = Slot(SlotKind.OUTPUT, k)
    return Binding(tuple(slots), (), (), ())


def test_probes_then_every_form_of_every_placement_then_the_error():
    launcher = pipeline.Launcher(_kernel)
    error = CompileError("no")
    placements = iter(itertools.combinations(range(1, 11), 2))
    searched_flags = []

    def fail(searched) -> bool:
        """One placement failing: whether the front tries another."""
        searched_flags.append(searched)
        try:
            launcher.probes.did_not_compile("k", _binding(next(placements)), error, error,
                                            searched)
        except written_params.PlacementFailed:
            return True
        return False

    def searched_now() -> bool:  # as Launcher.specialize decides
        return launcher.probes.climb_all or not launcher.probes.failed

    rounds = 0
    while fail(searched_now()):
        rounds += 1
    n = written_params.MAX_PROBES
    # The rule's with every form, the probes with their dynamic forms, then
    # all again with every form; the call's error after that.
    assert searched_flags == [True] + [False] * n + [True] * (n + 1)
    assert rounds == 2 * n + 1 < written_params.MAX_ROUNDS
    probes = launcher.probes
    assert not probes.climb_all and not probes.failed and not probes.avoid
