"""QuACK's kernels through cutecall on a GPU: numerics of every case of
``corpus.quack_corpus`` (tests/external/corpus) against its float32 reference,
through the JAX front (eager and inside ``jax.jit``) and the torch front,
and against QuACK's own launch paths (its torch entry points, and its
jax-tvm-ffi JAX path where QuACK has one and ``jax_tvm_ffi`` is installed).
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
pytest.importorskip("quack")
pytest.importorskip("cutlass")

from corpus import quack_corpus, split_arrays  # noqa: E402

pytestmark = pytest.mark.gpu

CASES = quack_corpus.cases("test")
IDS = [c.name for c in CASES]


def _np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().float().cpu().numpy()
    return np.asarray(jax.numpy.asarray(x, jax.numpy.float32))


def _close(actual, expected, case, what):
    a, e = _np(actual), _np(expected)
    assert a.shape == e.shape, (what, a.shape, e.shape)
    assert np.isfinite(a).all(), f"{case.name}: {what} has non-finite values"
    np.testing.assert_allclose(a, e, atol=case.atol, rtol=case.rtol,
                               err_msg=f"{case.name}: {what}")


def _same_tree(actual, expected, case, what):
    assert jax.tree.structure(actual) == jax.tree.structure(expected), \
        (case.name, what, jax.tree.structure(actual), jax.tree.structure(expected))
    for k, (a, e) in enumerate(zip(jax.tree.leaves(actual),
                                   jax.tree.leaves(expected))):
        _close(a, e, case, f"{what} output {k}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_reference(case):
    call, args = case.jax(True, 0)
    out = call(*args)
    _same_tree(out, case.jax_reference(*args), case, "jax eager")
    # Inside jit (arrays traced; None and runtime scalars fixed): the same
    # kernel, so the same bits.
    arrays, fill = split_arrays(args)
    jitted = jax.jit(lambda *a: call(*fill(a)))(*arrays)
    for a, b in zip(jax.tree.leaves(jitted), jax.tree.leaves(out)):
        np.testing.assert_array_equal(_np(a), _np(b))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_chained_calls_in_one_jit(case):
    """Twenty calls in one program (how the bench times kernels) give the
    eager result every time."""
    call, args = case.jax(True, 1)
    arrays, fill = split_arrays(args)
    first = call(*args)

    def many(*a):
        return [call(*fill(a)) for _ in range(20)]
    for out in jax.jit(many)(*arrays):
        for x, y in zip(jax.tree.leaves(out), jax.tree.leaves(first)):
            np.testing.assert_array_equal(_np(x), _np(y))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_reference(case):
    k, args = case.torch("cuda", 0)
    assert k(*args) is None
    torch.cuda.synchronize()
    expected = case.torch_reference(*args)
    assert len(expected) == len(case.torch_outputs)
    for i, e in zip(case.torch_outputs, expected):
        _close(args[i], e, case, f"torch argument {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_authors_torch(case):
    if case.authors_torch is None:
        pytest.skip("QuACK has no torch entry point for this kernel")
    k, ours = case.torch("cuda", 2)
    k(*ours)
    _, theirs = case.torch("cuda", 2)  # same seed: same inputs
    case.authors_torch(*theirs)
    torch.cuda.synchronize()
    for i in case.torch_outputs:
        # The same QuACK kernel code: equal up to the last bit of rounding.
        torch.testing.assert_close(ours[i], theirs[i], atol=1e-3, rtol=1e-2,
                                   msg=lambda m: f"{case.name} arg {i}: {m}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_authors_jax(case):
    if case.authors_jax is None:
        pytest.skip("QuACK has no JAX path for this kernel")
    pytest.importorskip("jax_tvm_ffi")
    call, args = case.jax(True, 3)
    theirs = case.authors_jax(*[a for a in args if a is not None])
    ours = call(*args)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(_np(a), _np(b), atol=1e-3, rtol=1e-2,
                                   err_msg=case.name)


@pytest.mark.parametrize("kernel", ["softmax_fwd", "rmsnorm_fwd"])
def test_torch_views_and_new_shapes(kernel):
    """Row-sliced views (offset pointers, same strides, new M; the float32
    (M,) outputs lose their 16-byte alignment at odd offsets) give correct
    results."""
    m, n = quack_corpus.SHAPES["test"][kernel]
    case = quack_corpus.case(kernel, m, n)
    k, args = case.torch("cuda", 4)
    for rows in (slice(8, m), slice(1, m - 3)):
        sub = [a[rows] if isinstance(a, torch.Tensor) and a.dim() >= 1
               and a.shape[0] == m else a for a in args]
        k(*sub)
        torch.cuda.synchronize()
        for i, e in zip(case.torch_outputs, case.torch_reference(*sub)):
            _close(sub[i], e, case, f"view {rows} arg {i}")


def test_jax_softmax_two_widths_in_one_process():
    for n in (1024, 2048):
        case = quack_corpus.case("softmax_fwd", 1000, n)
        call, args = case.jax(True, 5)
        _same_tree(call(*args), case.jax_reference(*args), case, f"N={n}")


@pytest.mark.parametrize("kernel", ["softmax_fwd", "rmsnorm_fwd",
                                    "cross_entropy_fwd"])
def test_empty_batch(kernel):
    """M = 0: QuACK's own paths return without launching (``x.numel() ==
    0``); through cutecall the call must not fail either (a grid of 0
    blocks is a CUDA launch error)."""
    case = quack_corpus.case(kernel, 0, 1024)
    call, args = case.jax(True, 0)
    for out in jax.tree.leaves(call(*args)):
        assert out.shape[0] == 0
    k, targs = case.torch("cuda", 0)
    k(*targs)
    torch.cuda.synchronize()
