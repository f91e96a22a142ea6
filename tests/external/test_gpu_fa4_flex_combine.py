"""FlashAttention-4's flex-attention forward and split-KV combine
(``tests/external/corpus/fa4_flex_corpus``, ``fa4_combine_corpus``) on a GPU:
outputs through cutecall's JAX front (eager and inside ``jax.jit``) and
torch front against the float32 references and, bit for bit, against FA4's
own torch paths on the same inputs (both kernels are deterministic: no
atomics, a fixed reduction order); FA4's public entry points
(``flash_attn_func``, ``flash_attn_combine``) give the same bits; a new aux
scalar value changes the flex output as the reference says, without a
compile.

Torch output buffers start NaN-filled, so an element a kernel fails to
write shows.
"""

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")
torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from corpus import fa4_combine_corpus as combine  # noqa: E402
from corpus import fa4_flex_corpus as flex  # noqa: E402
from corpus_checks import as_numpy, assert_close, assert_same, split_arrays  # noqa: E402

pytestmark = pytest.mark.gpu

FLEX = flex.cases("test")[0]
COMBINE = combine.cases("test")[0]
CASES = [FLEX, COMBINE]
IDS = ["flex", "combine"]
SEED = 0


def _torch_run(case, runner=None):
    """(the torch args after the launch, references computed before it)."""
    kernel, args = case.torch("cuda", SEED)
    want = case.torch_reference(*args)
    (runner or kernel)(*args)
    torch.cuda.synchronize()
    return args, want


def _jax_args_from(case, targs):
    """The JAX call's arguments holding the torch call's inputs (outputs
    dropped; tensors copied row-major through DLPack)."""
    inputs = tuple(a for i, a in enumerate(targs) if i not in case.torch_outputs)
    torch.cuda.synchronize()
    return jax.tree.map(
        lambda t: jnp.from_dlpack(t.detach().clone().contiguous())
        if isinstance(t, torch.Tensor) else t, inputs)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_reference(case):
    call, args = case.jax(True, SEED)
    got = jax.block_until_ready(call(*args))
    want = case.jax_reference(*args)
    assert len(got) == len(want) == 2
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, case, f"output {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_under_jit_is_eager(case):
    """Inside a jitted program, arrays traced (the aux tensor included),
    the runtime scalars Python values: the same kernel, the same bits."""
    call, args = case.jax(True, SEED)
    arrays, rebuild = split_arrays(args)
    eager = call(*args)
    jitted = jax.jit(lambda *a: call(*rebuild(a)))(*arrays)
    for i, (e, j) in enumerate(zip(eager, jitted)):
        assert_same(j, e, case, f"output {i}, jit vs eager")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_reference(case):
    args, want = _torch_run(case)
    for i, w in zip(case.torch_outputs, want):
        assert_close(args[i], w, case, f"output {i}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_matches_fa4_own_path(case):
    ours, want = _torch_run(case)
    theirs, _ = _torch_run(case, case.authors_torch)
    for i, w in zip(case.torch_outputs, want):
        assert_close(theirs[i], w, case, f"FA4's path, output {i}")
        assert torch.equal(ours[i], theirs[i]), \
            f"{case.name}: output {i} differs from FA4's"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_matches_fa4_own_path(case):
    theirs, _ = _torch_run(case, case.authors_torch)
    call, _ = case.jax(False, SEED)
    got = jax.block_until_ready(call(*_jax_args_from(case, theirs)))
    for g, i in zip(got, case.torch_outputs):
        assert_same(g, theirs[i], case, f"output {i} vs FA4's")


def test_flex_matches_flash_attn_func():
    from flash_attn.cute.interface import flash_attn_func
    ours, _ = _torch_run(FLEX)
    q, k, v, out, lse, scale, *rest = ours
    aux = rest[-1]
    o, l = flash_attn_func(q, k, v, softmax_scale=scale, causal=True,
                           score_mod=flex.alibi_score_mod(),
                           aux_tensors=list(aux.tensors),
                           aux_scalars=aux.scalars, return_lse=True)
    assert torch.equal(o, out) and torch.equal(l, lse)


def test_combine_matches_flash_attn_combine():
    from flash_attn.cute.interface import flash_attn_combine
    ours, _ = _torch_run(COMBINE)
    out_partial, lse_partial, out, lse = ours
    o, l = flash_attn_combine(out_partial, lse_partial, out_dtype=torch.bfloat16)
    assert torch.equal(o, out) and torch.equal(l, lse)


def test_flex_new_logit_scale_runs_the_same_kernel():
    """The logit scale is a runtime argument: 1.25 instead of 0.8 gives
    the reference's new output, through both fronts, with no compile."""
    kernel, args = FLEX.torch("cuda", SEED)
    kernel(*args)  # warm: compiled (or loaded) here
    call, jargs = FLEX.jax(True, SEED)
    jax.block_until_ready(call(*jargs))
    before = cutecall.compile_stats()["compiles"]
    args = args[:-1] + (flex.aux_data(args[-1].tensors[0], 1.25),)
    want = FLEX.torch_reference(*args)
    kernel(*args)
    torch.cuda.synchronize()
    for i, w in zip(FLEX.torch_outputs, want):
        assert_close(args[i], w, FLEX, f"torch output {i}, logit scale 1.25")
    jargs = jargs[:-1] + (flex.aux_data(jargs[-1].tensors[0], 1.25),)
    got = jax.block_until_ready(call(*jargs))
    for i, (g, w) in enumerate(zip(got, FLEX.jax_reference(*jargs))):
        assert_close(g, w, FLEX, f"JAX output {i}, logit scale 1.25")
    assert cutecall.compile_stats()["compiles"] == before
