"""QuACK's epilogue GEMMs (``tests/external/corpus/quack_gemm_corpus``) on a
GPU: outputs through cutecall's JAX front (eager and inside ``jax.jit``) and
torch front against the float32 references and, bit for bit, against QuACK's
own torch entry points on the same inputs with the same configuration
(QuACK's GEMMs are deterministic: no split-K, a fixed K order per tile); the
references agree with QuACK's reference functions; new alpha and beta
change gemm_add's output as the reference says, without a compile.

Torch output buffers start NaN-filled, so an element a kernel fails to
write shows (the symmetric GEMM writes each off-diagonal tile once and
mirrors it: every element of D must still be written).
"""

import numpy as np
import pytest

pytest.importorskip("quack")
torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from corpus import quack_gemm_cases as qc  # noqa: E402
from corpus import quack_gemm_corpus as corpus  # noqa: E402
from corpus_checks import as_numpy, assert_close, split_arrays  # noqa: E402

pytestmark = pytest.mark.gpu

CASES = corpus.cases("test")
IDS = list(corpus.KERNELS)
BY_NAME = dict(zip(IDS, CASES))
SEED = 0


def _written(case, args) -> list:
    """The tensors the kernel wrote, in ``torch_outputs`` order (an
    epilogue output: its ``mAuxOut``)."""
    return [args[i] if isinstance(args[i], torch.Tensor) else args[i].mAuxOut
            for i in case.torch_outputs]


def _values(want) -> list:
    return [w["mAuxOut"] if isinstance(w, dict) else w for w in want]


def _nan_filled(case, args):
    for t in _written(case, args):
        t.fill_(float("nan"))


def _torch_run(case, runner=None):
    """(the torch args after the launch, references computed before it)."""
    kernel, args = case.torch("cuda", SEED)
    _nan_filled(case, args)
    want = _values(case.torch_reference(*args))
    (runner or kernel)(*args)
    torch.cuda.synchronize()
    return args, want


def _outputs(got) -> list:
    return list(got) if isinstance(got, (tuple, list)) else [got]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_reference(case):
    call, args = case.jax(True, SEED)
    got = _outputs(jax.block_until_ready(call(*args)))
    want = _outputs(case.jax_reference(*args))
    assert len(got) == len(want) == len(case.torch_outputs)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, case, f"output {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_under_jit_is_eager(case):
    call, args = case.jax(True, SEED)
    arrays, rebuild = split_arrays(args)
    eager = _outputs(call(*args))
    jitted = _outputs(jax.jit(lambda *a: call(*rebuild(a)))(*arrays))
    for e, j in zip(eager, jitted):
        np.testing.assert_array_equal(as_numpy(j), as_numpy(e), err_msg=case.name)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_reference(case):
    args, want = _torch_run(case)
    for i, (g, w) in enumerate(zip(_written(case, args), want)):
        assert_close(g, w, case, f"output {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_quack_own_path(case):
    ours, want = _torch_run(case)
    theirs, _ = _torch_run(case, case.authors_torch)
    for i, (o, t, w) in enumerate(zip(_written(case, ours), _written(case, theirs), want)):
        assert_close(t, w, case, f"QuACK's path, output {i}")
        assert torch.equal(o, t), f"{case.name}: output {i} differs from QuACK's"


@pytest.mark.parametrize("name", IDS)
def test_jax_matches_quack_own_path(name):
    case = BY_NAME[name]
    theirs, _ = _torch_run(case, case.authors_torch)
    call, _ = case.jax(False, SEED)
    got = _outputs(jax.block_until_ready(
        call(*corpus.jax_args_from_torch(name, theirs))))
    for i, (g, t) in enumerate(zip(got, _written(case, theirs))):
        np.testing.assert_array_equal(as_numpy(g), as_numpy(t), err_msg=f"{case.name}: output {i}")


@pytest.mark.parametrize("name", IDS)
def test_references_are_quacks(name):
    """QuACK's reference functions (CUDA, float32 copies of the inputs)."""
    from quack import gemm_interface as gi
    case = BY_NAME[name]
    _, args = case.torch("cuda", SEED)
    a, b, _d, c, epi, _sched, var = (x.float() if isinstance(x, torch.Tensor) else x
                                     for x in args)
    if name == "gemm_add":
        theirs = [gi.gemm_add_ref(a, b, c, bias=epi.mRowVecBroadcast,
                                  alpha=epi.alpha, beta=epi.beta)]
    elif name == "gemm_act":
        theirs = list(gi.gemm_act_ref(a, b, bias=epi.mRowVecBroadcast,
                                      activation=qc.ACTIVATION))
    elif name == "gemm_dact":
        theirs = list(gi.gemm_dact_ref(a, b, c, activation=qc.ACTIVATION))
    elif name == "gemm_symmetric":
        theirs = [epi.alpha * gi.gemm_ref(a, a.mT)]
    else:
        theirs = [gi.gemm_ref(a, b.mT, cu_seqlens_m=var.mCuSeqlensM)]
    for w, t in zip(_values(case.torch_reference(*args)), theirs):
        np.testing.assert_allclose(as_numpy(w), as_numpy(t), atol=1e-3, rtol=1e-3, err_msg=name)


def test_symmetric_output_is_symmetric():
    args, _ = _torch_run(BY_NAME["gemm_symmetric"])
    d = args[2]
    assert torch.equal(d, d.mT)
    call, jargs = BY_NAME["gemm_symmetric"].jax(True, SEED)
    out = np.asarray(call(*jargs))
    np.testing.assert_array_equal(out, out.T)


def test_new_alpha_beta_run_the_same_kernel():
    case = BY_NAME["gemm_add"]
    kernel, args = case.torch("cuda", SEED)
    kernel(*args)  # compiled (or loaded) here
    call, jargs = case.jax(True, SEED)
    jax.block_until_ready(call(*jargs))
    before = cutecall.compile_stats()["compiles"]
    args = args[:4] + (args[4]._replace(alpha=-1.5, beta=0.25),) + args[5:]
    want = _values(case.torch_reference(*args))
    kernel(*args)
    torch.cuda.synchronize()
    assert_close(args[2], want[0], case, "torch, alpha -1.5, beta 0.25")
    jargs = jargs[:3] + (jargs[3]._replace(alpha=-1.5, beta=0.25),) + jargs[4:]
    assert_close(call(*jargs), case.jax_reference(*jargs), case, "JAX, alpha -1.5, beta 0.25")
    assert cutecall.compile_stats()["compiles"] == before
