"""Liger-Kernel's CuTe DSL ops (``corpus.liger_corpus``) compile for sm_90a
through both of cutecall's fronts from Liger's own kernel objects, with no
``output_params`` / ``outputs=`` names, on a machine without a GPU.

What a user relies on: Liger builds its kernels with ``--enable-tvm-ffi``
and an environment stream; cutecall takes the same objects and compiles
them once. JSD writes ``(x, y, loss, dX, labels)``: its outputs sit before
an optional input, and bind there in JAX (the lowered custom call's
operands) and in torch (the custom op marks exactly loss and dX mutated).
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("liger_kernel.ops.backends._cutedsl.jsd")

import jax  # noqa: E402

import cutecall  # noqa: E402
from corpus import liger_corpus as liger  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"
TEST = liger.SHAPES["test"]


def _entries() -> int:
    return cutecall.compile_stats()["entries"]


def _operands(text: str) -> str:
    m = re.search(r'operands = "([^"]*)"', text)
    assert m, text[:2000]
    return m.group(1)


def _mutated(k) -> list[str]:
    return re.findall(r"Tensor\(\w!\) (\w+)", str(k._op._opoverload._schema))


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(("liger_corpus",),
                                        ("liger_kernel", "cutlass", "torch", "jax")) == []


def test_jsd_outputs_before_the_labels_jax(x64, fresh_key_space):
    case = liger.jsd_case(*TEST["jsd"], labels=True)
    call, args = case.jax(False, 0)
    before = _entries()
    lowered = call.lower(*args)
    text = lowered.as_text()
    assert text.count(CUSTOM_CALL) == 1
    assert _operands(text) == "mX,mY,mLabel,mLoss,mDX"
    assert [o.shape for o in jax.tree.leaves(lowered.out_info)] == [TEST["jsd"]] * 2
    assert _entries() - before == 1  # one kernel (N static: the fallback)
    # Another row count and another scale: nothing new compiles.
    import cutlass
    other = liger.jsd_case(TEST["jsd"][0] + 1024, TEST["jsd"][1], labels=True)
    _, args2 = other.jax(False, 1)
    args2 = args2[:3] + (cutlass.Float32(0.25),) + args2[4:]
    assert _operands(call.lower(*args2).as_text()) == "mX,mY,mLabel,mLoss,mDX"
    assert _entries() - before == 1


def test_jsd_outputs_before_the_labels_torch(fresh_key_space):
    case = liger.jsd_case(*TEST["jsd"], labels=True)
    k, args = case.torch("meta", 0)
    before = _entries()
    k.compile(*args)
    assert _entries() - before == 1
    assert k.output_params == ["mLoss", "mDX"]  # learned, not named
    assert _mutated(k) == ["mLoss", "mDX"]


def test_jsd_without_labels_and_swiglu_both_fronts(fresh_key_space):
    for case in liger.cases("test"):
        call, args = case.jax(False, 0)
        before = _entries()
        text = call.lower(*args).as_text()
        assert text.count(CUSTOM_CALL) == 1, case.name
        assert _entries() - before == 1, case.name  # one kernel a front
        k, targs = case.torch("meta", 0)
        k.compile(*targs)
        assert _entries() - before == 2, case.name
        written = {"liger.jsd": ["mLoss", "mDX"], "liger.swiglu_fwd": ["mC"]}
        assert _mutated(k) == written[case.name.split("[")[0]], case.name
