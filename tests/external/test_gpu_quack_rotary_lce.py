"""QuACK's rotary embedding and linear-cross-entropy GEMM
(``tests/external/corpus/quack_rotary_corpus``, ``quack_lce_corpus``) on a GPU:
outputs through cutecall's JAX front (eager and inside ``jax.jit``) and
torch front against the float32 references and, bit for bit, against
QuACK's own torch paths on the same inputs (both kernels are deterministic:
no atomics, each output element written by one thread in a fixed order);
QuACK's public ``apply_rotary`` gives the same bits; the LCE outputs give
the loss QuACK's scaled-exp linear cross-entropy computes from them; a
second batch/sequence length (rotary) or row count (LCE) runs the same
kernel.

Torch output buffers (and the LCE's ``sum_exp`` / ``max_log2_out`` sinks)
start NaN-filled, so an element a kernel fails to write shows.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("quack")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from corpus import quack_lce_corpus as lce  # noqa: E402
from corpus import quack_rotary_corpus as rotary  # noqa: E402
from corpus_checks import as_numpy, split_arrays  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore::cutecall.StaticFallbackWarning"),
              pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")]

ROTARY = rotary.cases("test")[0]
LCE = lce.cases("test")[0]
CASES = [ROTARY, LCE]
IDS = ["rotary", "lce"]
MODULE = {ROTARY.name: rotary, LCE.name: lce}
SECOND = {ROTARY.name: rotary.case(6, 2025, 4, 128), LCE.name: lce.case(2024, 1536, 512)}
SEED = 0


def _torch_outputs(case, args) -> list:
    """What the torch call wrote, in the JAX call's output order."""
    if case.name.startswith("quack.linear_cross_entropy"):
        return [args[2], *(getattr(args[4], s) for s in lce.SINKS)]
    return [args[i] for i in case.torch_outputs]


def _torch_want(case, args) -> list:
    want = case.torch_reference(*args)
    if isinstance(want[-1], dict):  # LCE: (E, {sink: value})
        return [want[0], *(want[1][s] for s in lce.SINKS)]
    return list(want)


def _matches_reference(case, got, want, what):
    got, want = [as_numpy(g) for g in got], [as_numpy(w) for w in want]
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, (what, i, g.shape, w.shape)
        assert np.isfinite(g).all(), f"{case.name}: {what} output {i} has non-finite values"
    if len(got) == 4:  # LCE: E, sum_exp, k, target_logit
        # k = round(tile max * log2 e) may differ by one from the float32
        # reference's at a rounding tie; E and sum_exp then differ by that
        # power of two. Compare them at the reference's k.
        e, sum_exp, k, _ = got
        k_diff = k - want[2]
        assert np.abs(k_diff).max() <= 1, f"{case.name}: {what} max_log2_out"
        assert np.count_nonzero(k_diff) <= max(1, k_diff.size // 1000), \
            f"{case.name}: {what}: k differs from the reference's at {np.count_nonzero(k_diff)}"
        tile = lce.TILE["tile_N"]
        scale = np.exp2(k_diff)
        got = [(e.reshape(e.shape[0], -1, tile) * scale[..., None]).reshape(e.shape),
               sum_exp * scale, k - k_diff, got[3]]
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, atol=case.atol, rtol=case.rtol,
                                   err_msg=f"{case.name}: {what} output {i}")


def _same(case, got, want, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(as_numpy(g), as_numpy(w), err_msg=f"{case.name}: {what} {i}")


def _torch_run(case, runner=None):
    """(the torch args after the launch, references computed before it)."""
    kernel, args = case.torch("cuda", SEED)
    want = _torch_want(case, args)
    (runner or kernel)(*args)
    torch.cuda.synchronize()
    return args, want


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_reference(case):
    call, args = case.jax(True, SEED)
    got = jax.tree.leaves(jax.block_until_ready(call(*args)))
    _matches_reference(case, got, jax.tree.leaves(case.jax_reference(*args)), "JAX")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_under_jit_is_eager(case):
    """Inside a jitted program (arrays traced, the epilogue's sinks
    included; ints and DSL scalars Python values): the same bits."""
    call, args = case.jax(True, SEED)
    arrays, rebuild = split_arrays(args)
    eager = jax.tree.leaves(call(*args))
    jitted = jax.tree.leaves(jax.jit(lambda *a: call(*rebuild(a)))(*arrays))
    _same(case, jitted, eager, "jit vs eager, output")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_reference(case):
    args, want = _torch_run(case)
    _matches_reference(case, _torch_outputs(case, args), want, "torch")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_quack_own_path(case):
    ours, want = _torch_run(case)
    theirs, _ = _torch_run(case, case.authors_torch)
    _matches_reference(case, _torch_outputs(case, theirs), want, "QuACK's path")
    for i, (o, t) in enumerate(zip(_torch_outputs(case, ours), _torch_outputs(case, theirs))):
        assert torch.equal(o, t), f"{case.name}: output {i} differs from QuACK's"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_quack_own_path(case):
    theirs, _ = _torch_run(case, case.authors_torch)
    call, _ = case.jax(False, SEED)
    got = call(*MODULE[case.name].jax_args_from_torch(theirs))
    _same(case, jax.tree.leaves(jax.block_until_ready(got)),
          _torch_outputs(case, theirs), "output vs QuACK's")


def test_rotary_matches_apply_rotary():
    from quack.rotary import apply_rotary
    ours, _ = _torch_run(ROTARY)
    x, cos, sin, _, _, out, _ = ours
    assert torch.equal(apply_rotary(x, cos, sin), out)


def test_lce_outputs_give_quacks_loss():
    """log(sum over tiles of sum_exp * 2^k) - target_logit at valid rows:
    the loss QuACK's scaled-exp forward computes from the same gemm1
    outputs, and PyTorch's cross-entropy of the float32 logits."""
    from quack.linear_cross_entropy import scaled_exp_linear_cross_entropy_fwd
    ours, _ = _torch_run(LCE)
    x, w, _, _, epi, _, _ = ours
    valid = epi.target != lce.IGNORE_INDEX
    lse = torch.log((epi.sum_exp * torch.exp2(epi.max_log2_out)).sum(-1))
    loss = torch.where(valid, lse - epi.target_logit, 0.0)
    quack_loss, _, _ = scaled_exp_linear_cross_entropy_fwd(
        x, w, epi.target, 4096, lce.IGNORE_INDEX, need_dx=False, need_dw=False)
    torch.testing.assert_close(loss, quack_loss[:x.shape[0]], atol=1e-4, rtol=1e-5)
    ce = torch.nn.functional.cross_entropy(
        x.float() @ w.float().T, epi.target.long(), ignore_index=lce.IGNORE_INDEX,
        reduction="none")
    torch.testing.assert_close(loss, ce, atol=LCE.atol, rtol=LCE.rtol)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_second_shape_runs_the_same_kernel(case):
    """Another batch and sequence length (rotary), row count (LCE), in the
    same divisibility classes: the reference's outputs, no compile."""
    kernel, args = case.torch("cuda", SEED)
    kernel(*args)
    call, jargs = case.jax(True, SEED)
    jax.block_until_ready(call(*jargs))
    before = cutecall.compile_stats()["compiles"]
    other = SECOND[case.name]
    args, want = _torch_run(other)
    _matches_reference(other, _torch_outputs(other, args), want, "torch, second shape")
    call, jargs = other.jax(True, SEED)
    got = jax.tree.leaves(jax.block_until_ready(call(*jargs)))
    _matches_reference(other, got, jax.tree.leaves(other.jax_reference(*jargs)),
                       "JAX, second shape")
    assert cutecall.compile_stats()["compiles"] == before
