"""How many forms a placement question traces (``outputs.stage``): the
rule's placement climbs every static form the compile would; a placement
tried after it failed climbs its dynamic and guided forms only, unless the
DSL asks for a value known at trace time; a store of the wrong element type
ends any climb; a placement apart from the rule's that fails as it did ends
the question (the call's own error); the probes are bounded. No DSL: the
trace is replaced by one that fails with a chosen cause and counts its
calls."""

from __future__ import annotations

import itertools
import types

import pytest

from cutecall._driver import fallback, fallback_climb
from cutecall._driver.compile_error import CompileError
from cutecall._driver.outputs import probes
from cutecall._driver.store import memory

OPERANDS = [types.SimpleNamespace(name=n, shape=(1000, 64)) for n in ("x", "out")]
FORMS = 1 + len(fallback.search([op.shape for op in OPERANDS]))
_unique = itertools.count()


def _traces(cause: str, searched: bool, source_line: str = "", keys: str = "") -> int:
    tried = []
    run = keys or next(_unique)  # keys of their own: no rejection from another test

    def failing(spec):
        tried.append(spec.key)
        raise CompileError("no", kernel="k", arch="sm_90a", root_cause=cause,
                           source_line=source_line)
    build = lambda masks: types.SimpleNamespace(key=f"probe-{run}-{masks}")  # noqa: E731
    traced = fallback_climb.climb_traces(build, OPERANDS, (0, 0), name="k", options="",
                                         arch="sm_90a", fallback=True, trace=failing,
                                         searched=searched)
    assert traced.error is not None and traced.value is None
    return len(set(tried))


def test_the_rules_placement_climbs_every_form(fresh_key_space):
    assert FORMS > 2
    assert _traces("Operation creation failed", True) == FORMS


def test_a_probe_traces_its_dynamic_form_only(fresh_key_space):
    assert _traces("Operation creation failed", False) == 1


@pytest.mark.parametrize("cause", [
    "`const_expr()` requires a value known at code-read time, but you gave it a "
    "Runtime value (Staged value). (at jsd.py:327)",
    "`assert` requires a value known at code-read time, but you gave it a Runtime "
    "value (Staged value). (at kernels.py:18)"])
def test_a_probe_the_dsl_asks_to_make_static_climbs(fresh_key_space, cause):
    assert _traces(cause, False) == FORMS


def test_a_stride_the_failing_line_reads_is_compiled_in_next(fresh_key_space):
    error = CompileError("no", source_line="assert x.stride[0] == 64, 'x rows'")
    assert fallback.guided(error, ["x", "out"], [2, 2]) == \
        (1 << fallback.STRIDE_SHIFT, 0)
    error = CompileError("no", source_line="n = out.shape[1]")
    assert fallback.guided(error, ["x", "epilogue.out"], [2, 2]) == (0, 0b10)


def test_a_store_of_the_wrong_element_type_ends_the_climb(monkeypatch, fresh_key_space):
    cause = "ValueError: type mismatch, store f32 to Int32 (at bsa_fwd_sm90.py:315)"
    assert _traces(cause, True) == 1
    tried = []  # a compile's climb too

    def failing(spec, name, options, arch):
        tried.append(spec.key)
        raise CompileError("no", kernel=name, arch=arch, root_cause=cause)
    monkeypatch.setattr(memory, "get_locked", failing)
    run = next(_unique)
    with pytest.raises(CompileError):
        fallback_climb.climb(lambda masks: types.SimpleNamespace(key=f"c-{run}-{masks}"),
                             OPERANDS, (0, 0), name="k", options="", arch="sm_90a",
                             fallback=True, explicit=lambda masks: "")
    assert len(tried) == 1


def test_a_form_rejected_earlier_for_its_element_type_ends_a_later_climb(fresh_key_space):
    # The same placement traced again in the process (another call site of
    # the kernel): the remembered rejection keeps its cause, so the climb
    # ends where the first one did -- no DSL run, no other form.
    cause = "ValueError: type mismatch, store f32 to Int32 (at bsa_fwd_sm90.py:315)"
    run = f"again-{next(_unique)}"
    assert _traces(cause, False, "bsa_fwd_sm90.py:315: x.shape[0]", run) == 1
    assert _traces(cause, False, "bsa_fwd_sm90.py:315: x.shape[0]", run) == 0


def _error(cause: str, line: str = "k.py:3") -> CompileError:
    return CompileError("no", root_cause=cause, source_line=line)


def test_a_placement_apart_from_the_rules_failing_as_it_did_ends_the_question():
    p = probes.Probes()
    rule = _error("AssertionError: x's rows must be 64 apart")
    assert p.searched((3,)) and p.did_not_trace((3,), rule, rule)
    assert p.apart_from == (3,) and not p.searched((1,))  # next: outputs elsewhere
    first = _error("`assert` requires a value known at code-read time")
    assert not p.did_not_trace((1,), first, rule)  # the call's error, not the placement's
    assert p.first_error is rule


def test_a_placement_sharing_an_output_or_failing_otherwise_goes_on():
    p = probes.Probes()
    rule = _error("type mismatch, store f32 to Int32", "lse[row] = x")
    p.did_not_trace((6, 7), rule, rule)
    assert p.did_not_trace((4, 5), _error("not congruent"), _error("not congruent"))
    assert p.apart_from == ()
    assert p.did_not_trace((5, 7), rule, rule)  # shares 7 with the rule's


def test_the_probes_are_bounded():
    p = probes.Probes()
    n = 0
    while p.did_not_trace((n,), _error(f"cause {n}"), _error(f"cause {n}")):
        n += 1
    assert len(p.failed) == probes.MAX_PROBES + 1 and p.avoid == set(p.failed)
    assert probes.MAX_ROUNDS > probes.MAX_PROBES + probes.MAX_EMPTY_PROBES
