"""QuACK's epilogue GEMMs (``tests/external/corpus/quack_gemm_corpus``: the
default epilogue with C, alpha, beta and bias; the GELU activation epilogue
and its backward; the symmetric GEMM; the varlen-M grouped GEMM) compile for
sm_90a through both of cutecall's fronts, on a machine without a GPU.

What a user relies on: QuACK's own kernel object (captured from QuACK's
public torch entry point) reaches cutecall unchanged and lowers to one
custom call; the call's arguments have the structure QuACK compiles with
(its ``EpilogueArguments``, ``TileSchedulerOptions`` and
``VarlenArguments``), and QuACK's own torch path (``Case.authors_torch``),
run on the case's meta tensors up to its ``cute.compile``, builds a kernel
object equal to ours -- the premise of the GPU tests' bitwise comparison; outputs inside the ``EpilogueArguments`` are aliased
inputs, and the symmetric GEMM's D reaches both mD and its transposed alias;
alpha and beta are runtime values and a second shape of the same
divisibility classes compiles nothing new. Also checks that the JAX and
torch references agree (QuACK's own reference functions need CUDA's
``torch.mm(out_dtype=)``: the GPU tests compare with them).
"""

import re

import numpy as np
import pytest

pytest.importorskip("quack")
torch = pytest.importorskip("torch")

from cutecall._driver.slots import SlotKind  # noqa: E402
from corpus import authors  # noqa: E402
from corpus import quack_gemm_cases as qc  # noqa: E402
from corpus import quack_gemm_corpus as corpus  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

CASES = corpus.cases("test")
IDS = list(corpus.KERNELS)
TARGET = "stablehlo.custom_call @cutecall_call_v1"
# Same divisibility classes as the test shapes (M's, N's and K's).
SECOND = {"gemm_add": corpus.case("gemm_add", 2001, 768, 512),
          "gemm_act": corpus.case("gemm_act", 1512, 512, 128),
          "gemm_dact": corpus.case("gemm_dact", 1512, 512, 128),
          "gemm_symmetric": corpus.case("gemm_symmetric", 1512, 1512, 128),
          "gemm_varlen_m": corpus.case("gemm_varlen_m", (100, 200, 3, 51, 300, 40, 316),
                                       768, 128)}


def _attr(text: str, name: str) -> str:
    found = re.findall(rf'{name} = ("[^"]*"|dense<[^>]*>)', text)
    assert len(found) == 1, found
    return found[0]


def _lower(case, args=None) -> str:
    call, default = case.jax(False, 0)
    return call.lower(*(args or default)).as_text()


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(('quack_gemm_corpus',),
                                        ('quack', 'cutlass', 'torch', 'jax')) == []


def test_cases_and_sizes():
    for size in ("test", "bench"):
        cs = corpus.cases(size)
        assert [c.name.split("[")[0] for c in cs] == [f"quack.{k}" for k in corpus.KERNELS]
        assert all(c.authors_torch is not None for c in cs)
    assert corpus.SHAPES["test"]["gemm_add"][0] % 16 and corpus.SHAPES["test"]["gemm_act"][0] % 16
    with pytest.raises(ValueError, match="square"):
        corpus.case("gemm_symmetric", 64, 128, 32)


@pytest.mark.parametrize("name", IDS)
def test_quack_object_lowers_once_and_serves_a_second_shape(name, compiles):
    """QuACK's object itself (no launcher of ours) lowers to one custom call
    and compiles on meta tensors; another shape of the same classes, in
    either front, is the same kernel."""
    case = dict(zip(IDS, CASES))[name]
    call, args = case.jax(False, 0)
    assert type(call.fn).__module__.startswith("quack.")
    assert call.fn is qc.kernel_object(name)
    text = call.lower(*args).as_text()
    assert text.count(TARGET) == 1 and compiles() == 1
    assert _attr(_lower(SECOND[name]), "key") == _attr(text, "key")
    kernel, targs = case.torch("meta", 0)
    compiled = kernel.compile(*targs)
    assert compiles() == 2
    kernel2, targs2 = SECOND[name].torch("meta", 0)
    assert kernel2.compile(*targs2).key == compiled.key
    _, real = case.torch("cpu", 0)  # real (allocator-aligned) pointers
    assert kernel.compile(*real).key == compiled.key
    assert compiles() == 2


@pytest.mark.parametrize("name", IDS)
def test_call_arguments_have_quack_structure(name):
    """The torch call passes QuACK's compile arguments up to varlen_args;
    the JAX call the same without mD (an output)."""
    case = dict(zip(IDS, CASES))[name]
    theirs = qc.captured(name).args[:7]
    _, targs = case.torch("meta", 0)
    assert authors.structure(targs) == authors.structure(theirs)
    _, jargs = case.jax(False, 0)
    assert authors.structure(tuple(jargs)) == \
        authors.structure(theirs[:2] + theirs[3:])


@pytest.mark.parametrize("name", IDS)
def test_quacks_own_path_compiles_the_same_kernel(name):
    """authors_torch, run on the case's meta tensors up to its
    cute.compile: QuACK's path builds a kernel object equal to ours
    (class and every attribute) with the arguments our torch call passes."""
    from cutecall._driver.fingerprint import fingerprint
    case = dict(zip(IDS, CASES))[name]
    kernel, targs = case.torch("meta", 0)
    theirs = qc.quack_compile_args(name, case.authors_torch, *targs)
    assert type(theirs.kernel) is type(kernel.fn)
    # Ours as captured (tracing adds attributes to the object in use).
    ours = qc.captured.__wrapped__(name).kernel
    assert fingerprint(theirs.kernel, "launcher") == fingerprint(ours, "launcher")
    assert authors.structure(theirs.args[:7]) == authors.structure(targs)


def test_alpha_and_beta_are_runtime_values(compiles):
    case = dict(zip(IDS, CASES))["gemm_add"]
    call, args = case.jax(False, 0)
    first = _lower(case)
    epi = args[3]._replace(alpha=-1.0, beta=0.25)
    second = _lower(case, args[:3] + (epi,) + args[4:])
    assert compiles() == 1
    assert _attr(first, "key") == _attr(second, "key")
    assert _attr(first, "scalars") != _attr(second, "scalars")
    kernel, targs = case.torch("meta", 0)
    keys = {kernel.compile(*targs[:4], targs[4]._replace(alpha=a, beta=b), *targs[5:]).key
            for a, b in ((0.5, 2.0), (1.0, 1.0), (-3.0, 0.0))}
    assert len(keys) == 1 and compiles() == 2


def test_epilogue_outputs_are_aliased_inputs():
    """gemm_act: D binds to mD (output_params), the post-activation is the
    input leaf epilogue_args.mAuxOut aliased to output 1."""
    call, args = dict(zip(IDS, CASES))["gemm_act"].jax(False, 0)
    binding, _, _ = call._bind(args, {})
    slots = dict(zip([p.name for p in call.launcher.sig.params], binding.slots))
    assert (slots["mD"].kind, slots["mD"].index) == (SlotKind.OUTPUT, 0)
    assert slots["mC"].kind == SlotKind.NONE
    text = _lower(dict(zip(IDS, CASES))["gemm_act"])
    assert _attr(text, "operands") == \
        '"mA,mB,epilogue_args.mRowVecBroadcast,epilogue_args.mAuxOut,mD"'
    assert "output_operand_alias" in text


def test_symmetric_d_reaches_md_and_its_transposed_alias():
    """D is output 0, aliased whole to epilogue_args.mAuxOut (a (1, 0)
    view); output_params names mD, so the kernel receives the buffer
    twice, as QuACK passes D and D.mT."""
    text = _lower(dict(zip(IDS, CASES))["gemm_symmetric"])
    assert _attr(text, "operands") == '"mA,mB,epilogue_args.mAuxOut,mD"'
    assert re.search(r"output_operand_alias<output_tuple_indices = \[\], "
                     r"operand_index = 2", text)


# ---------------------------------------------------------------------------
# The references

def _small(name):
    if name == "gemm_varlen_m":
        return corpus.case(name, (5, 1, 11), 64, 32)
    m = 40 if name == "gemm_symmetric" else 37
    return corpus.case(name, m, 40 if name == "gemm_symmetric" else 64, 32)


@pytest.mark.usefixtures("cpu_numerics")
@pytest.mark.parametrize("name", IDS)
def test_jax_and_torch_references_agree(name):
    case = _small(name)
    _, targs = case.torch("cpu", 3)
    want = case.torch_reference(*targs)
    got = case.jax_reference(*corpus.jax_args_from_torch(name, targs))
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        w = w["mAuxOut"] if isinstance(w, dict) else w
        np.testing.assert_allclose(np.asarray(g), w.numpy(), atol=1e-4, rtol=1e-4)
