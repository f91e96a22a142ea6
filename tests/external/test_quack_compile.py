"""QuACK's kernels (``quack-kernels``) compile for sm_90a through both
cutecall fronts with default specs, on a machine without a GPU.

For every case of ``corpus.quack_corpus`` (tests/external/corpus):
- JAX: ``call.lower(*ShapeDtypeStructs)`` compiles the kernel and lowers to
  exactly one cutecall custom call whose outputs have the structure of the
  case's reference (``None`` where an output parameter receives ``None``);
- torch: ``kernel.compile(*meta tensors)`` compiles the specialization;
- specialization: another M in the same divisibility class compiles
  nothing new, an M in another class compiles exactly one more kernel.

QuACK sizes some launch configurations from the GPU it sees when a kernel
object is built (``quack.rmsnorm_config``); without one it honours
``QUACK_ARCH``, which these tests set to sm_90 so the kernel objects are the
ones an H100 builds.
"""

from __future__ import annotations

import os
import re

import pytest

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("QUACK_ARCH", "sm_90")
pytest.importorskip("quack")
pytest.importorskip("cutlass")

import cutecall  # noqa: E402
from corpus import quack_corpus, split_arrays  # noqa: E402
from corpus_checks import heavy_imports_after_building  # noqa: E402

KERNELS = quack_corpus.KERNELS
SHAPES = quack_corpus.SHAPES["test"]
CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"


def _misses() -> int:
    """DSL compiles run plus kernels loaded from the session's artifact
    store; in-process cache hits do not count."""
    s = cutecall.compile_stats()
    return s["compiles"] + s["disk_hits"]


def _fallbacks() -> int:
    """Kernels compiled with static extents after the dynamic layout failed
    (QuACK's norms and cross-entropy compare extents with Python ints): the
    failed attempt is one more DSL compile."""
    return cutecall.compile_stats().get("static_fallbacks", 0)


def _other_m(m: int, same_class: bool) -> int:
    # M + 1024 keeps every power-of-two factor up to 1024 (any class cap);
    # M + 1 flips the lowest bit, so its class differs from M's.
    return m + 1024 if same_class else m + 1


def test_building_cases_imports_nothing_heavy():
    assert heavy_imports_after_building(('quack_corpus',),
                                        ('quack', 'cutlass', 'torch')) == []


def test_cases_sizes():
    for size in ("test", "bench"):
        cs = quack_corpus.cases(size)
        assert [c.name.split("[")[0] for c in cs] == \
            [f"quack.{k}" for k in KERNELS]
        for c in cs:
            assert c.name.endswith("]") and "bf16" in c.name
    ms = [m for m, _ in SHAPES.values()]
    assert any(m % 16 for m in ms)
    assert set(quack_corpus.SHAPES["bench"].values()) == {(16384, 4096)}


@pytest.mark.parametrize("kernel", KERNELS)
def test_jax_lowers_with_default_specs(kernel, fresh_key_space):
    m, n = SHAPES[kernel]
    case = quack_corpus.case(kernel, m, n)
    call, args = case.jax(False, 0)
    assert isinstance(call, cutecall.CutlassCall)
    before, fell_back = _misses(), _fallbacks()
    lowered = call.lower(*args)
    assert _misses() - before <= 1 + (_fallbacks() - fell_back)
    text = lowered.as_text()
    assert text.count(CUSTOM_CALL) == 1, text[:2000]

    # The outputs have the structure and avals of the reference.
    arrays, fill = split_arrays(args)
    expected = jax.eval_shape(lambda *a: case.jax_reference(*fill(a)), *arrays)
    assert jax.tree.structure(lowered.out_info) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(lowered.out_info),
                         jax.tree.leaves(expected)):
        assert got.shape == want.shape

    # Same divisibility class of M: nothing new; another class: one more.
    for same, new in ((True, 0), (False, 1)):
        other = quack_corpus.case(kernel, _other_m(m, same), n)
        _, other_args = other.jax(False, 0)
        before = _misses()
        text = call.lower(*other_args).as_text()
        assert text.count(CUSTOM_CALL) == 1
        assert _misses() - before == new, (kernel, same)


@pytest.mark.parametrize("kernel", KERNELS)
def test_torch_compiles_for_meta_tensors(kernel, fresh_key_space):
    m, n = SHAPES[kernel]
    case = quack_corpus.case(kernel, m, n)
    k, args = case.torch("meta", 0)
    assert isinstance(k, cutecall.torch.Kernel)
    for i in case.torch_outputs:
        assert isinstance(args[i], torch.Tensor) and args[i].is_meta
    before, fell_back = _misses(), _fallbacks()
    k.compile(*args)
    assert _misses() - before <= 1 + (_fallbacks() - fell_back)
    for same, new in ((True, 0), (False, 1)):
        _, other_args = quack_corpus.case(kernel, _other_m(m, same), n).torch(
            "meta", 0)
        before = _misses()
        k.compile(*other_args)
        assert _misses() - before == new, (kernel, same)


def _kernel_key(text: str) -> str:
    """The specialization key the custom call carries."""
    m = re.search(r'key = "([0-9a-f]+)"', text)
    assert m, text[:2000]
    return m.group(1)


def _lower_softmax(n):
    call, _args = quack_corpus.case("softmax_fwd", 1000, n).jax(False, 0)
    return call.lower(jax.ShapeDtypeStruct((1000, 1024), quack_corpus.bf16()))


def _lower_rmsnorm(weight_offset):
    import cutlass
    import jax.numpy as jnp
    from quack.rmsnorm import RMSNorm
    S = jax.ShapeDtypeStruct
    x, stat = S((1000, 1024), quack_corpus.bf16()), S((1000,), jnp.float32)
    call = cutecall.cutlass_call(
        RMSNorm(cutlass.BFloat16, 1024, weight_offset=weight_offset),
        output_shape_dtype=(x, None, stat, None))
    return call.lower(x, S((1024,), jnp.float32), None, None, 1e-6)


@pytest.mark.parametrize("lower, values", [
    (_lower_softmax, (1024, 2048)),     # N baked into Softmax(dtype, N)
    (_lower_rmsnorm, (0.0, 1.0)),       # RMSNorm(..., weight_offset=)
], ids=["softmax_N", "rmsnorm_weight_offset"])
def test_objects_differing_in_constructor_args_compile_separately(lower, values):
    """Two kernel objects whose constructor arguments differ bake different
    constants into their kernels. Called on the same shapes (the Softmax
    one on N=1024 arrays: the kernel reads N from the object), their
    operand specs are equal, so only the objects' state tells them apart."""
    keys = {_kernel_key(lower(v).as_text()) for v in values}
    assert len(keys) == 2


def test_equal_objects_share_a_compile():
    """A fresh kernel object equal to one already traced (tracing sets
    attributes such as ``cluster_n`` on it) reuses its compile."""
    first = quack_corpus.case("rmsnorm_fwd", 1001, 1024)
    call, args = first.jax(False, 0)
    key = _kernel_key(call.lower(*args).as_text())
    before = _misses()
    again, args = quack_corpus.case("rmsnorm_fwd", 1001, 1024).jax(False, 0)
    assert again.fn is not call.fn
    assert _kernel_key(again.lower(*args).as_text()) == key
    assert _misses() == before


def test_authors_jax_path_is_optional():
    """QuACK's JAX path needs jax-tvm-ffi; without it the case's callable
    raises ImportError (and the case still builds)."""
    case = quack_corpus.case("softmax_fwd", 16, 1024)
    assert case.authors_jax is not None
    try:
        import jax_tvm_ffi  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="jax-tvm-ffi"):
            case.authors_jax(jax.numpy.ones((16, 1024), quack_corpus.bf16()))
