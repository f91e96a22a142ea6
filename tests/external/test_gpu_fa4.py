"""FlashAttention-4's Hopper kernels (``tests/external/corpus/fa4_corpus``) on a
GPU: each case's outputs through cutecall's JAX (eager and inside ``jit``)
and torch fronts against its float32 reference, and against FA4's own
launch path on the same tensors; and the four kernels composed into a
differentiable JAX attention (``fa4_corpus.jax_flash_attention``) against
the reference attention and its VJP.

Every torch output buffer starts NaN-filled, so an element a kernel fails
to write shows. FA4's path runs the same kernel code: the deterministic
kernels (forward, preprocess, postprocess; dK and dV of the backward) must
match it bit for bit; dQaccum, summed with atomics, within tolerance.
"""

import functools
import re

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from corpus import fa4_corpus, fa4_kernels  # noqa: E402
from corpus import fa4_reference as ref  # noqa: E402

pytestmark = pytest.mark.gpu

CASES = fa4_corpus.cases("test")
IDS = [c.name for c in CASES]
SEED = 0


@functools.lru_cache(maxsize=None)
def _shared_kernels() -> dict:
    """{case name: names of the other cases whose compiled kernel it got}:
    cutecall must compile each kernel config separately; a causal case run
    with the non-causal kernel computes the wrong thing, and a backward
    compiled for tile_m 80 writes past a tile_m-64 case's dQ accumulator."""
    by_key = {}
    for case in CASES:
        call, args = case.jax(False, SEED)
        text = call.lower(*args).as_text()
        by_key.setdefault(("jax", re.findall(r'key = "(\w+)"', text)[0]),
                          []).append(case.name)
        kernel, targs = case.torch("meta", SEED)
        by_key.setdefault(("torch", kernel.compile(*targs).key),
                          []).append(case.name)
    shared = {}
    for names in by_key.values():
        for n in names:
            if len(names) > 1:
                shared.setdefault(n, set()).update(set(names) - {n})
    return shared


def _check_own_kernel(name: str):
    if name in _shared_kernels():
        pytest.fail(f"{name} shares its compiled kernel with "
                    f"{sorted(_shared_kernels()[name])}; not launching it")


@pytest.fixture(autouse=True)
def _own_kernel(request):
    callspec = getattr(request.node, "callspec", None)
    case = callspec.params.get("case") if callspec else None
    if case is not None:
        _check_own_kernel(case.name)


def _np(x):
    return np.asarray(jnp.asarray(x).astype(jnp.float32))


def _close(got, want, case, what):
    np.testing.assert_allclose(got, want, atol=case.atol, rtol=case.rtol,
                               err_msg=f"{case.name}: {what}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_reference(case):
    call, args = case.jax(True, SEED)
    got = jax.block_until_ready(call(*args))
    want = case.jax_reference(*args)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape
        _close(_np(g), _np(w), case, f"output {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_under_jit_matches_eager(case):
    """Inside a jitted program (arrays traced; None and the runtime scalars
    stay Python values, as a runtime scalar must be known at trace time)."""
    call, args = case.jax(True, SEED)
    where = [i for i, a in enumerate(args) if hasattr(a, "shape")]

    @jax.jit
    def program(*arrays):
        full = list(args)
        for i, x in zip(where, arrays):
            full[i] = x
        return call(*full)

    eager = call(*args)
    jitted = program(*(args[i] for i in where))
    for e, j in zip(eager, jitted):
        _close(_np(j), _np(e), case, "jit vs eager")


def _torch_run(case, runner=None):
    """(outputs after the launch, references computed before it)."""
    import torch
    kernel, args = case.torch("cuda", SEED)
    want = case.torch_reference(*args)
    (runner or kernel)(*args)
    torch.cuda.synchronize()
    return [args[i] for i in case.torch_outputs], want


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_reference(case):
    got, want = _torch_run(case)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape
        _close(g.float().cpu().numpy(), w.float().cpu().numpy(), case,
               f"output {case.torch_outputs[i]}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_fa4_own_path(case):
    import torch
    got, want = _torch_run(case)
    theirs, _ = _torch_run(case, case.authors_torch)
    for i, (g, t, w) in enumerate(zip(got, theirs, want)):
        where = f"output {case.torch_outputs[i]}"
        _close(t.float().cpu().numpy(), w.float().cpu().numpy(), case,
               f"FA4's path, {where}")
        if "bwd_sm90" in case.name and i == 0:  # dQaccum: atomics
            _close(g.float().cpu().numpy(), t.float().cpu().numpy(), case,
                   where)
        else:
            assert torch.equal(g, t), f"{case.name}: {where} differs from FA4's"


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
def test_jax_flash_attention_grad_is_the_gradient(causal):
    """FA4's four kernels through cutecall, composed as FA4's autograd
    function composes them (``fa4_corpus.jax_flash_attention``), give
    attention and its gradient."""
    b, s, h = fa4_corpus.SIZES["test"]
    for case in fa4_corpus.build(b, s, h):
        if case.name.split("[")[0].endswith("_causal") == causal:
            _check_own_kernel(case.name)
    d = fa4_kernels.HDIM
    scale = d ** -0.5
    keys = jax.random.split(jax.random.key(SEED), 4)
    q, k, v, do = (jax.random.normal(x, (b, s, h, d)).astype(jnp.bfloat16)
                   for x in keys)
    f = fa4_corpus.jax_flash_attention(causal)

    @jax.jit
    def value_and_vjp(q, k, v, do):
        o, vjp = jax.vjp(f, q, k, v)
        return o, vjp(do)

    o, got = value_and_vjp(q, k, v, do)
    f32 = [x.astype(jnp.float32) for x in (q, k, v, do)]
    want_o, ref_vjp = jax.vjp(
        lambda q, k, v: ref.jax_attention(q, k, v, scale, causal)[0], *f32[:3])
    np.testing.assert_allclose(_np(o), _np(want_o), atol=2e-2, rtol=2e-2)
    for name, g, w in zip(("dq", "dk", "dv"), got, ref_vjp(f32[3])):
        np.testing.assert_allclose(_np(g), _np(w), atol=5e-2, rtol=5e-2,
                                   err_msg=name)
