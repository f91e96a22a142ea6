"""FlashAttention-4's flex-attention forward (a ``score_mod`` reading an
aux tensor and an aux scalar) and its split-KV combine kernel
(``tests/external/corpus/fa4_flex_corpus``, ``fa4_combine_corpus``) compile for
sm_90a through both of cutecall's fronts, on a machine without a GPU.

What a user relies on: FA4's own kernel object (captured from FA4's host
code) reaches cutecall unchanged and lowers to one custom call; the call's
arguments have the structure FA4 compiles with (its ``AuxData`` NamedTuple
included); the combine's outputs bind after its inputs with no
``output_params``; a new aux scalar value, batch or sequence length (and,
for the combine, split count up to 32) compiles nothing new. Also checks
what the references mean: ALiBi with a unit logit scale and zero slopes is
plain causal attention, and combining per-split attentions is attention.
"""

import re
import warnings

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")
torch = pytest.importorskip("torch")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall._driver.slots import SlotKind  # noqa: E402
from corpus import authors  # noqa: E402
from corpus import fa4_combine_corpus as combine  # noqa: E402
from corpus import fa4_flex_corpus as flex  # noqa: E402
from corpus import fa4_reference as ref  # noqa: E402
from corpus_checks import heavy_imports_after_building, split_arrays  # noqa: E402

FLEX = flex.cases("test")[0]
COMBINE = combine.cases("test")[0]
CASES = [FLEX, COMBINE]
IDS = ["flex", "combine"]
TARGET = "stablehlo.custom_call @cutecall_call_v1"
# Same divisibility classes as the test shapes: (B, S, H) and (splits, B, S, H).
SECOND = {"flex": flex.case(6, 136, 2), "combine": combine.case(5, 6, 45, 2)}

# FA4 4.0.0b36 uses DSL APIs that DSL 4.8 deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*is deprecated:DeprecationWarning")


@pytest.fixture(autouse=True)
def _no_static_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("error", cutecall.StaticFallbackWarning)
        yield


def _attr(text: str, name: str) -> str:
    found = re.findall(rf'{name} = ("[^"]*"|dense<[^>]*>)', text)
    assert len(found) == 1, found
    return found[0]


def _lower(case, args=None):
    call, default = case.jax(False, 0)
    return call.lower(*(args or default)).as_text()


def _fa4_args(name: str) -> tuple:
    """FA4's own compile arguments for the test shape, launcher order."""
    if name == "flex":
        b, s, h = flex.SHAPES["test"]["fwd_flex_sm90"]
        return flex.capture_forward(b, s, h).args
    splits, b, s, h = combine.SHAPES["test"]["fwd_combine"]
    return combine.capture_combine(splits, h, b, s).args


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(('fa4_flex_corpus', 'fa4_combine_corpus'),
                                        ('flash_attn', 'cutlass', 'torch', 'jax')) == []


def test_cases_and_sizes():
    for module, kernel in ((flex, "fwd_flex_sm90"), (combine, "fwd_combine")):
        assert module.KERNELS == (kernel,)
        for size in ("test", "bench"):
            (c,) = module.cases(size)
            assert c.name.startswith(f"fa4.{kernel}") and c.authors_torch
        assert any(n % 16 for n in module.SHAPES["test"][kernel])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_lowers_fa4_object_to_one_custom_call(case, compiles):
    call, args = case.jax(False, 0)
    # FA4's object itself, no wrapper launcher of ours.
    assert type(call.fn).__module__.startswith("flash_attn.cute.")
    assert type(call.fn).__call__.__module__ == type(call.fn).__module__
    lowered = call.lower(*args)
    assert lowered.as_text().count(TARGET) == 1
    assert compiles() == 1
    arrays, rebuild = split_arrays(args, jax.ShapeDtypeStruct)
    expected = jax.eval_shape(lambda *a: case.jax_reference(*rebuild(a)), *arrays)
    assert [o.shape for o in lowered.out_info] == [e.shape for e in expected]


@pytest.mark.parametrize("name", IDS)
def test_call_arguments_have_fa4_structure(name):
    """What cutecall passes is what FA4 compiles with: the torch call is
    FA4's argument list up to its last given parameter; the JAX call the
    same without the outputs."""
    case = dict(zip(IDS, CASES))[name]
    fa4 = _fa4_args(name)
    _, targs = case.torch("meta", 0)
    assert authors.structure(targs) == authors.structure(fa4[:len(targs)])
    _, jargs = case.jax(False, 0)
    outputs = set(case.torch_outputs)
    inputs = tuple(a for i, a in enumerate(fa4[:len(targs)]) if i not in outputs)
    assert authors.structure(tuple(jargs)) == authors.structure(inputs)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_compiles_fa4_object_on_meta_tensors(case, compiles):
    kernel, args = case.torch("meta", 0)
    assert type(kernel.fn).__module__.startswith("flash_attn.cute.")
    compiled = kernel.compile(*args)
    assert compiles() == 1
    # Tensors with real (allocator-aligned) pointers select the same kernel.
    _, real = case.torch("cpu", 0)
    assert kernel.compile(*real).key == compiled.key
    assert compiles() == 1


def test_combine_outputs_bind_after_the_inputs():
    """``call(out_partial, lse_partial)``: mO and mLSE, the tensor
    parameters after the last array argument, receive the outputs."""
    call, args = COMBINE.jax(False, 0)
    assert call.output_params is None
    binding, _, _ = call._bind(args, {})
    names = [p.name for p in call.launcher.sig.params]
    slots = dict(zip(names, binding.slots))
    assert [(slots[n].kind, slots[n].index) for n in
            ("mO_partial", "mLSE_partial", "mO", "mLSE")] == [
        (SlotKind.INPUT, 0), (SlotKind.INPUT, 1),
        (SlotKind.OUTPUT, 0), (SlotKind.OUTPUT, 1)]
    assert {slots[n].kind for n in names[4:]} == {SlotKind.DEFAULT, SlotKind.STREAM}
    assert _attr(_lower(COMBINE), "operands") == \
        '"mO_partial,mLSE_partial,mO,mLSE"'


def test_flex_outputs_bind_before_the_aux_data():
    """The AuxData pytree comes after the outputs' parameters; they still
    go to mO and mLSE (FA4's order), the aux tensor is an input leaf."""
    assert _attr(_lower(FLEX), "operands") == \
        '"mQ,mK,mV,aux_data.tensors[0],mO,mLSE"'


def test_flex_aux_scalar_is_a_runtime_value(compiles):
    """AuxData's scalars are DSL values (as FA4's users pass them): a new
    logit scale is a new argument of the same kernel, in both fronts."""
    call, args = FLEX.jax(False, 0)
    slopes = args[-1].tensors[0]
    first = _lower(FLEX)
    second = _lower(FLEX, args[:-1] + (flex.aux_data(slopes, 1.25),))
    assert compiles() == 1
    assert _attr(first, "key") == _attr(second, "key")
    assert _attr(first, "scalars") != _attr(second, "scalars")
    kernel, targs = FLEX.torch("meta", 0)
    keys = {kernel.compile(*targs[:-1], flex.aux_data(targs[-1].tensors[0], s)).key
            for s in (0.8, 1.25, -2.0)}
    assert len(keys) == 1 and compiles() == 2


@pytest.mark.parametrize("name", IDS)
def test_second_shape_compiles_nothing(name, compiles):
    case, other = dict(zip(IDS, CASES))[name], SECOND[name]
    assert _attr(_lower(other), "key") == _attr(_lower(case), "key")
    kernel, args = case.torch("meta", 0)
    kernel2, args2 = other.torch("meta", 0)
    assert kernel.compile(*args).key == kernel2.compile(*args2).key
    assert compiles() == 2  # one per front


# ---------------------------------------------------------------------------
# The references

def _qkv(b=1, s=70, h=2, d=32, seed=0):
    keys = jax.random.split(jax.random.key(seed), 3)
    return [jax.random.normal(k, (b, s, h, d), jnp.float32) for k in keys]


@pytest.mark.usefixtures("cpu_numerics")
def test_flex_reference_is_alibi_attention():
    q, k, v = _qkv()
    scale = 0.125
    o, lse = flex.jax_flex_attention(q, k, v, scale, jnp.zeros(2), 1.0)
    want_o, want_lse = ref.jax_attention(q, k, v, scale, True)
    np.testing.assert_allclose(o, want_o, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(lse, want_lse, atol=1e-5, rtol=1e-5)
    # The bias: the same as adding -slope * (i - j) to the scores.
    slopes = jnp.asarray(flex.alibi_slopes(2))
    o, lse = flex.jax_flex_attention(q, k, v, scale, slopes, 0.5)
    i = jnp.arange(q.shape[1])
    bias = -slopes[:, None, None] * (i[:, None] - i[None, :])
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision="highest") * scale * 0.5 + bias
    s = jnp.where(i[:, None] >= i[None, :], s, -jnp.inf)
    np.testing.assert_allclose(lse, jax.nn.logsumexp(s, -1), atol=1e-5, rtol=1e-5)
    tq, tk, tv = (torch.from_numpy(np.array(x)) for x in (q, k, v))
    t_o, t_lse = flex.torch_flex_attention(tq, tk, tv, scale,
                                           torch.from_numpy(np.array(slopes)), 0.5)
    np.testing.assert_allclose(t_o.numpy(), o, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(t_lse.numpy(), lse, atol=1e-4, rtol=1e-4)


@pytest.mark.usefixtures("cpu_numerics")
def test_combine_reference_merges_split_kv_attention():
    """Attention over key splits, combined, is attention over all keys
    (a split holding no key for a row has LSE -inf)."""
    q, k, v = _qkv(s=70)
    scale = 0.2
    bounds = [0, 30, 55, 70]
    parts = [ref.jax_attention(q, k[:, a:b], v[:, a:b], scale, False)
             for a, b in zip(bounds, bounds[1:])]
    o_p = jnp.stack([o for o, _ in parts])
    lse_p = jnp.stack([lse.transpose(0, 2, 1) for _, lse in parts])
    lse_p = lse_p.at[-1, :, :5].set(-jnp.inf)  # rows 0..4: last split empty
    o, lse = combine.jax_combine(o_p, lse_p)
    want_o, want_lse = ref.jax_attention(q, k[:, :55], v[:, :55], scale, False)
    np.testing.assert_allclose(o[:, :5], want_o[:, :5], atol=1e-5, rtol=1e-5)
    want_o, want_lse = ref.jax_attention(q, k, v, scale, False)
    np.testing.assert_allclose(o[:, 5:], want_o[:, 5:], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(lse[:, 5:], want_lse.transpose(0, 2, 1)[:, 5:],
                               atol=1e-5, rtol=1e-5)
    t_o, t_lse = combine.torch_combine(torch.from_numpy(np.array(o_p)),
                                       torch.from_numpy(np.array(lse_p)))
    np.testing.assert_allclose(t_o.numpy(), o, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(t_lse.numpy(), lse, atol=1e-5, rtol=1e-5)
