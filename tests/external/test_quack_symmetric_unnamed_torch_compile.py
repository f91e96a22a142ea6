"""QuACK's symmetric GEMM through the torch front as its authors call it,
with no output names: ``kernel(GemmSymmetricSm90, outputs=1)`` called
``(a, a, d, None, epi, sched, None)``, ``epi.mAuxOut`` = ``d.mT``. The
trace shows the kernel writing ``mD`` and ``epilogue_args.mAuxOut`` (D^T,
a view of D); the convention alone (inputs, outputs, then the rest) would
rank ``epilogue_args`` first, but a parameter written only through a leaf
is a container, and a tensor output goes to a parameter written whole
(``placement.place_written``). So the output binds at ``mD``, the custom op
marks exactly ``mD`` mutated -- what ``outputs=("mD",)`` (tests/external/
corpus/quack_gemm_corpus.py) gives -- and both share one kernel. CPU:
compiles for sm_90a on meta tensors."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("quack")
torch = pytest.importorskip("torch")

import cutecall  # noqa: E402
import cutecall.torch as ct  # noqa: E402
from cutecall._driver.outputs import stage  # noqa: E402
from corpus import quack_gemm_cases as qc  # noqa: E402
from corpus import quack_gemm_corpus as corpus  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _schema(k) -> str:
    """The custom op's arguments (its name, numbered per object, left out)."""
    return str(k._op._opoverload._schema).split("(", 1)[1]


def _mutated(k) -> list[str]:
    return re.findall(r"Tensor\(\w!\) (\w+)", _schema(k))


def _args():
    _, args = corpus.case("gemm_symmetric",
                          *corpus.SHAPES["test"]["gemm_symmetric"]).torch("meta", 0)
    return args


def _kernels(*outputs):
    """Launch objects of QuACK's kernel object, made before any compile as
    a user makes them (a compile sets the object's attributes -- its tile
    layouts -- so one made after fingerprints another state)."""
    return [ct.kernel(qc.kernel_object("gemm_symmetric"), outputs=o) for o in outputs]


def test_symmetric_output_found_at_md_without_names(compiles):
    args = _args()
    unnamed, named, again = _kernels(1, ("mD",), 1)
    unnamed.compile(*args)
    assert compiles() == 1
    assert unnamed.output_params == ["mD"]
    assert _mutated(unnamed) == ["mD"]
    named.compile(*args)  # the same kernel: no compile
    assert compiles() == 1
    assert named.output_params == unnamed.output_params == ["mD"]
    assert _schema(named) == _schema(unnamed)
    again.compile(*args)  # learned by another launch object: no trace
    assert again.output_params == ["mD"] and compiles() == 1


def test_a_kernel_a_cache_held_binds_md_too(compiles):
    args = _args()
    named, unnamed = _kernels(("mD",), 1)
    named.compile(*args)
    assert compiles() == 1
    # A new process would know nothing the first compile traced: a trace
    # alone (no DSL passes) tells where the kernel writes.
    stage.forget()
    unnamed.compile(*args)
    assert unnamed.output_params == ["mD"]
    assert _mutated(unnamed) == ["mD"]
    assert _schema(unnamed) == _schema(named)
    assert compiles() == 1
