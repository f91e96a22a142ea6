"""QuACK's rotary embedding and its linear-cross-entropy GEMM
(``tests/external/corpus/quack_rotary_corpus``, ``quack_lce_corpus``) compile
for sm_90a through both of cutecall's fronts, on a machine without a GPU.

What a user relies on: QuACK's own kernel objects reach cutecall unchanged
(no launcher of ours) and lower to one custom call / compile on meta
tensors; the calls' arguments have the structure QuACK compiles with.

Rotary: the kernel asserts on cos/sin dim 1 at trace time. cutecall's static
fallback compiles in exactly those two dims (what QuACK's fake tensors have
static) and says so in one warning per front; a second batch and sequence
length in the same divisibility classes compiles nothing.

LCE: QuACK's ``EpilogueArguments`` (a ``Constexpr`` field, three sink
outputs, int32 targets) and ``TileSchedulerOptions`` pass through both
fronts, the sinks JAX outputs by key path; the case compiles what QuACK's
``EpiMod.gemm`` compiles. The references: RoPE is a rotation by the
position's angles; the LCE outputs give the cross-entropy.
"""

import collections
import os
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("QUACK_ARCH", "sm_90")
pytest.importorskip("quack")

import cutlass  # noqa: E402
import jax  # noqa: E402

import cutecall  # noqa: E402
from cutecall._driver.store import memory as compile_cache  # noqa: E402
from cutecall._driver.slots import SlotKind  # noqa: E402
from corpus import authors  # noqa: E402
from corpus import quack_lce_corpus as lce  # noqa: E402
from corpus import quack_rotary_corpus as rotary  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

ROTARY = rotary.cases("test")[0]
LCE = lce.cases("test")[0]
TARGET = "stablehlo.custom_call @cutecall_call_v1"
# Same divisibility classes as the test shapes: batch and sequence length
# (rotary, 1001 + 1024), rows (LCE, 1000 + 1024).
ROTARY_2 = rotary.case(6, 2025, 4, 128)
LCE_2 = lce.case(2024, 1536, 512)
COS_SIN_DIM_1 = "static extents 64 (mCos dim 1, mSin dim 1), the rest dynamic"

# QuACK 0.6.5 uses DSL APIs that DSL 4.8 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated:DeprecationWarning")


@pytest.fixture
def fresh_fallback(compiles, monkeypatch):
    """The rotary kernel as a process meets it first: no dynamic form
    remembered as rejected, no fallback warned about (both are per
    process); compiles counted in a fresh key space."""
    monkeypatch.setattr(compile_cache, "_rejected", collections.OrderedDict())
    monkeypatch.setattr(compile_cache, "warned", set())
    # The launch objects remember the static dims they learned (Launcher.
    # static_dims): earlier tests in this process (the GPU file) used them.
    rotary._calls.cache_clear()
    return compiles


@pytest.fixture
def no_static_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("error", cutecall.StaticFallbackWarning)
        yield


def _attr(text: str, name: str) -> str:
    found = re.findall(rf'{name} = ("[^"]*"|dense<[^>]*>)', text)
    assert len(found) == 1, found
    return found[0]


def _only_fallback_warning(record) -> tuple[str, str]:
    """(the one StaticFallbackWarning's text, what it says it compiled in)."""
    found = [w for w in record if issubclass(w.category, cutecall.StaticFallbackWarning)]
    assert len(found) == 1, [str(w.message) for w in found]
    message = str(found[0].message)
    assert "kernel 'RotaryKernel' does not compile with dynamic layouts" in message
    assert "(at rotary.py:" in message  # the assert QuACK's kernel failed
    return message, re.search(r"compiled with (.*?), as its authors'", message).group(1)


def _out_shapes(case, args):
    leaves, tree = jax.tree.flatten(args)
    where = [i for i, x in enumerate(leaves) if isinstance(x, jax.ShapeDtypeStruct)]

    def reference(*arrays):
        full = list(leaves)
        for i, a in zip(where, arrays):
            full[i] = a
        return case.jax_reference(*jax.tree.unflatten(tree, full))
    return _shapes(jax.eval_shape(reference, *[leaves[i] for i in where]))


def _shapes(tree) -> list:
    return [o.shape for o in jax.tree.leaves(tree)]


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(('quack_rotary_corpus', 'quack_lce_corpus'),
                                        ('quack', 'cutlass', 'torch', 'jax')) == []


def test_cases_and_sizes():
    for module, kernel in ((rotary, "rotary"), (lce, "linear_cross_entropy")):
        assert module.KERNELS == (kernel,)
        for size in ("test", "bench"):
            (c,) = module.cases(size)
            assert c.name.startswith(f"quack.{kernel}[bf16 ") and c.authors_torch
        assert any(n % 16 for n in module.SHAPES["test"][kernel])
    assert lce.SHAPES["bench"]["linear_cross_entropy"][1] % lce.TILE["tile_N"] == 0
    with pytest.raises(ValueError, match="multiple of tile_N"):
        lce.case(128, 1000, 64)


# ---------------------------------------------------------------------------
# Rotary: the static fallback finds cos/sin dim 1, nothing else

def test_rotary_jax_compiles_cos_sin_dim_1_static_once(fresh_fallback):
    call, args = ROTARY.jax(False, 0)
    assert type(call.fn).__qualname__ == "RotaryKernel"  # QuACK's object itself
    assert type(call.fn).__module__ == "quack.rotary"
    before = cutecall.compile_stats()["static_fallbacks"]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always", cutecall.StaticFallbackWarning)
        lowered = call.lower(*args)
    message, compiled_in = _only_fallback_warning(record)
    assert compiled_in == COS_SIN_DIM_1
    assert "input_spec=(None, TensorSpec(static=(False, True)), " \
           "TensorSpec(static=(False, True)),)" in message
    text = lowered.as_text()
    assert text.count(TARGET) == 1
    assert _attr(text, "operands") == '"mX,mCos,mSin,mO"'
    assert _shapes(lowered.out_info) == _out_shapes(ROTARY, args)
    # Two DSL compiles: the dynamic form the DSL rejects, then the one
    # kernel (static cos/sin dim 1) that serves every shape below.
    assert fresh_fallback() == 2
    assert cutecall.compile_stats()["static_fallbacks"] == before + 1

    # Another batch and sequence length: the same kernel, no new warning;
    # max_seqlen (a Python int) is a runtime scalar of the call.
    _, args2 = ROTARY_2.jax(False, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cutecall.StaticFallbackWarning)
        text2 = call.lower(*args2).as_text()
    assert _attr(text2, "key") == _attr(text, "key")
    assert _attr(text2, "scalars") != _attr(text, "scalars")
    assert fresh_fallback() == 2 and cutecall.compile_stats()["entries"] == 1
    binding, _, _ = call._bind(args, {})
    slots = dict(zip([p.name for p in call.launcher.sig.params], binding.slots))
    assert slots["max_seqlen"].kind == SlotKind.SCALAR
    assert slots["mO"].kind == SlotKind.OUTPUT


def test_rotary_torch_compiles_cos_sin_dim_1_static_once(fresh_fallback):
    kernel, args = ROTARY.torch("meta", 0)
    assert type(kernel.fn).__module__ == "quack.rotary"
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always", cutecall.StaticFallbackWarning)
        compiled = kernel.compile(*args)
    message, compiled_in = _only_fallback_warning(record)
    assert compiled_in == COS_SIN_DIM_1
    assert "static={'mCos': (False, True), 'mSin': (False, True)}" in message
    assert fresh_fallback() == 2  # the rejected dynamic form, the kernel
    _, args2 = ROTARY_2.torch("meta", 0)
    _, real = ROTARY.torch("cpu", 0)  # allocator-aligned pointers: same kernel
    with warnings.catch_warnings():
        warnings.simplefilter("error", cutecall.StaticFallbackWarning)
        assert kernel.compile(*args2).key == compiled.key
        assert kernel.compile(*real).key == compiled.key
    assert fresh_fallback() == 2 and cutecall.compile_stats()["entries"] == 1


def test_rotary_arguments_have_quack_structure():
    """The torch call is QuACK's launch (x, cos, sin, None, None, out,
    max_seqlen); the JAX call the same without out. max_seqlen is a Python
    int at QuACK's launch as here; both fronts read it as the Int32 its
    parameter is annotated with, as QuACK compiles it."""
    quack = rotary.captured(128).args
    _, targs = ROTARY.torch("meta", 0)
    assert authors.structure(targs[:-1]) == authors.structure(quack[:6])
    assert authors.structure(quack[6]) == ("scalar", "Int32")
    call, jargs = ROTARY.jax(False, 0)
    assert authors.structure(jargs[:-1]) == authors.structure(quack[:5])
    assert type(jargs[-1]) is int and type(targs[-1]) is int
    for sig in (ROTARY.torch("meta", 0)[0].sig, call.launcher.sig):
        (p,) = [p for p in sig.params if p.name == "max_seqlen"]
        assert (p.kind, p.scalar_type) == ("scalar", "Int32")


# ---------------------------------------------------------------------------
# LCE: QuACK's epilogue pytree through both fronts

def test_lce_jax_lowers_quack_object_to_one_custom_call(compiles, no_static_fallback):
    call, args = LCE.jax(False, 0)
    assert type(call.fn).__module__ == "quack.epilogue.frontend"
    assert type(call.fn).__call__.__module__.startswith("quack.")
    lowered = call.lower(*args)
    text = lowered.as_text()
    assert text.count(TARGET) == 1
    assert compiles() == 1
    assert _attr(text, "operands") == (
        '"mA,mB,epilogue_args.sum_exp,epilogue_args.target_logit,'
        'epilogue_args.max_log2_out,epilogue_args.target,mD"')
    # Outputs 1-3 are the sink leaves (operands 2, 4, 3), updated in place.
    aliases = re.findall(r"output_tuple_indices = \[(\d)\], operand_index = (\d)", text)
    assert sorted(aliases) == [("1", "2"), ("2", "4"), ("3", "3")]
    assert _shapes(lowered.out_info) == _out_shapes(LCE, args)
    # Another M in the same class, another cluster count: nothing new.
    _, args2 = LCE_2.jax(False, 0)
    args2 = args2[:4] + (args2[4]._replace(max_active_clusters=cutlass.Int32(33)),) \
        + args2[5:]
    assert _attr(call.lower(*args2).as_text(), "key") == _attr(text, "key")
    assert compiles() == 1


def test_lce_torch_compiles_quack_object_on_meta_tensors(compiles, no_static_fallback):
    kernel, args = LCE.torch("meta", 0)
    assert type(kernel.fn).__module__ == "quack.epilogue.frontend"
    compiled = kernel.compile(*args)
    assert compiles() == 1
    _, real = LCE.torch("cpu", 0)
    _, other_m = LCE_2.torch("meta", 0)
    assert kernel.compile(*real).key == compiled.key
    assert kernel.compile(*other_m).key == compiled.key
    assert compiles() == 1


def test_lce_arguments_have_quack_structure():
    """The torch call is QuACK's compile arguments up to varlen_args
    (mA, mB, mD, mC, EpilogueArguments, TileSchedulerOptions, None); the
    JAX call the same without mD. max_log2 (Constexpr) is 192 in both."""
    quack = lce.captured().args
    _, targs = LCE.torch("meta", 0)
    assert authors.structure(targs) == authors.structure(quack[:7])
    _, jargs = LCE.jax(False, 0)
    assert authors.structure(tuple(jargs)) == authors.structure(quack[:2] + quack[3:7])
    epi = authors.structure(quack[4])
    assert epi[0] == "EpilogueArguments" and epi[1]["max_log2"] == 192


def test_lce_compiles_what_quacks_own_path_compiles(monkeypatch):
    """QuACK's path (``case.authors_torch``: ``scaled_exp_target_epi.gemm``
    as ``scaled_exp_linear_cross_entropy_fwd`` calls it; here on meta
    tensors of an sm90 device) passes ``_compile_gemm_epi`` exactly the
    case's compile arguments, the keyword ones at their defaults."""
    import inspect

    import quack.epilogue.frontend as frontend
    import quack.gemm_runtime.host as host

    class Reached(Exception):
        pass
    seen = {}

    def intercept(*args, **kwargs):
        seen.update(args=args, kwargs=kwargs)
        raise Reached
    defaults = {k: p.default for k, p in
                inspect.signature(host._compile_gemm_epi.__wrapped__).parameters.items()}
    ours, (_, args) = lce.gemm_epi_compile_args(), LCE.torch("meta", 0)
    monkeypatch.setattr(frontend, "get_device_capacity", lambda device: (9, 0))
    monkeypatch.setattr(host, "_compile_gemm_epi", intercept)
    with pytest.raises(Reached):
        LCE.authors_torch(*args)
    assert seen["args"] == ours
    assert all(defaults[k] == value for k, value in seen["kwargs"].items())


# ---------------------------------------------------------------------------
# The references

@pytest.mark.usefixtures("cpu_numerics")
def test_rotary_reference_is_rotation_by_position():
    """Each (x[i], x[i + d/2]) pair, as the complex number x[i] + j x[i+d/2],
    is multiplied by exp(j pos base^(-i/(d/2))): RoPE. Torch and JAX agree."""
    case = rotary.case(2, 9, 3, 16)
    _, targs = case.torch("cpu", 0)
    (got,) = case.torch_reference(*targs)
    half = 8
    angle = np.arange(9)[:, None] * rotary.ROPE_BASE ** (-np.arange(half) / half)
    xf = targs[0].float().numpy()
    z = (xf[..., :half] + 1j * xf[..., half:]) * np.exp(1j * angle)[None, :, None, :]
    want = np.concatenate([z.real, z.imag], axis=-1)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5, rtol=1e-5)
    jgot = case.jax_reference(*rotary.jax_args_from_torch(targs))
    np.testing.assert_allclose(np.asarray(jgot), got.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.usefixtures("cpu_numerics")
def test_lce_reference_gives_the_cross_entropy():
    """sum over tiles of sum_exp * 2^k is sum(exp(z)): log of it minus the
    target logit is PyTorch's cross-entropy at valid rows; E <= sqrt(2);
    ignored rows' target logit stays 0. Torch and JAX agree."""
    m, v = 40, 384
    case = lce.case(m, v, 64)
    _, targs = case.torch("cpu", 0)
    e, sinks = case.torch_reference(*targs)
    x, w, target = targs[0], targs[1], targs[4].target
    lse = torch.log((sinks["sum_exp"].double() *
                     torch.exp2(sinks["max_log2_out"].double())).sum(-1))
    z = x.double() @ w.double().T
    ce = torch.nn.functional.cross_entropy(z, target.long(), reduction="none",
                                           ignore_index=lce.IGNORE_INDEX)
    valid = target != lce.IGNORE_INDEX
    assert 0 < int(valid.sum()) < m
    np.testing.assert_allclose((lse - sinks["target_logit"].double())[valid],
                               ce[valid], atol=1e-4, rtol=1e-4)
    assert (sinks["target_logit"][~valid] == 0).all()
    assert float(e.max()) <= 2 ** 0.5 + 1e-6
    assert torch.equal(sinks["max_log2_out"], sinks["max_log2_out"].round())
    jgot = case.jax_reference(*lce.jax_args_from_torch(targs))
    for j, t in zip(jgot, (e, sinks["sum_exp"], sinks["max_log2_out"],
                           sinks["target_logit"])):
        np.testing.assert_allclose(np.asarray(j), t.numpy(), atol=1e-4, rtol=1e-4)
