"""FlashAttention-4's Hopper kernels (``tests/external/corpus/fa4_corpus``)
compile for sm_90a through both of cutecall's fronts with default specs, on
a machine without a GPU.

What a user relies on: one custom call per kernel call, every extent a
runtime value (no static fallback), one compile per kernel config (FA4's
causal and non-causal objects are different kernels), and no compile for a
new shape in the same divisibility class (here a seqlen of 200 instead of
256: not a multiple of any tile). Also checks the
references' two derived facts: the backward math against ``jax.grad``, and
the dQ accumulator order against the CuTe DSL's layout algebra for FA4's
own tiled MMA and copy.
"""

import re
import warnings

import numpy as np
import pytest

pytest.importorskip("flash_attn.cute")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import cutecall  # noqa: E402
from cutecall._driver.dsl import dsl_arch  # noqa: E402
from corpus import fa4_corpus, fa4_kernels  # noqa: E402
from corpus import fa4_reference as ref  # noqa: E402

SHAPE = fa4_corpus.SIZES["test"]      # (B, S, H)
SECOND = (SHAPE[0], 200, SHAPE[2])    # same divisibility classes
CASES = fa4_corpus.cases("test")
IDS = [c.name for c in CASES]
TARGET = "stablehlo.custom_call @cutecall_call_v1"

# FA4 4.0.0b36 uses DSL APIs that DSL 4.8 deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*is deprecated:DeprecationWarning")


@pytest.fixture(autouse=True)
def _no_static_fallback():
    """FA4's kernels compile with every extent dynamic, as FA4 compiles them."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", cutecall.StaticFallbackWarning)
        yield


def _key(text: str) -> str:
    keys = re.findall(r'key = "([0-9a-f]{64})"', text)
    assert len(keys) == 1, keys
    return keys[0]


def _lower(case):
    call, args = case.jax(False, 0)
    return call.lower(*args).as_text()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax_lowers_to_one_custom_call(case, compiles):
    text = _lower(case)
    assert text.count(TARGET) == 1
    assert compiles() <= 1  # 0 when an earlier test compiled it


def test_jax_each_config_compiles_its_own_kernel():
    """The kernel objects differ only in their attributes (is_causal, tile
    sizes...): the compile key must see them."""
    keys = {c.name: _key(_lower(c)) for c in CASES}
    assert len(set(keys.values())) == len(keys), keys


# A kernel object traced once (by cutecall, or by FA4's own cute.compile)
# carries what its __call__ stored: layouts, copy atoms holding MLIR values.
# Wrapping it again must not change its key or fail.
def test_jax_kernel_object_wrapped_again_after_a_trace(compiles):
    a = fa4_corpus.Attn(*SHAPE)
    kernel = fa4_kernels.fwd_kernel(False)
    x = jax.ShapeDtypeStruct(a.bshd, jnp.bfloat16)
    out = (x, jax.ShapeDtypeStruct(a.bhs, jnp.float32))
    # compile_key: a key no other test compiled, so the lowering traces.
    first = cutecall.cutlass_call(kernel, output_shape_dtype=out,
                                  compile_key="traced-then-wrapped")
    key = _key(first.lower(x, x, x, a.scale).as_text())
    before = compiles()
    again = cutecall.cutlass_call(kernel, output_shape_dtype=out,
                                  compile_key="traced-then-wrapped")
    assert _key(again.lower(x, x, x, a.scale).as_text()) == key
    assert compiles() == before


def test_torch_kernel_object_wrapped_after_a_jax_trace(compiles):
    import cutecall.torch
    case = CASES[0]
    kernel = fa4_kernels.fwd_kernel(False)
    call, args = case.jax(False, 0)
    x, out = args[0], call.output_shape_dtype
    cutecall.cutlass_call(kernel, output_shape_dtype=out,
                          compile_key="traced-by-jax").lower(x, x, x, args[3])
    _, targs = case.torch("meta", 0)
    cutecall.torch.kernel(kernel, outputs=2).compile(*targs)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_jax_second_shape_compiles_nothing(index, compiles):
    first = _key(_lower(CASES[index]))
    before = compiles()
    second = fa4_corpus.build(*SECOND)[index]
    assert _key(_lower(second)) == first
    assert compiles() == before


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_torch_compiles_on_meta_tensors(case, compiles):
    kernel, args = case.torch("meta", 0)
    kernel.compile(*args)
    assert compiles() <= 1
    kernel.compile(*args)
    assert compiles() <= 1


@pytest.mark.parametrize("case", CASES[:4], ids=IDS[:4])
def test_torch_meta_compile_is_what_real_tensors_launch(case):
    """A warm-up on meta tensors compiles the specialization that tensors
    with real (allocator-aligned) pointers select: here CPU tensors, whose
    layout classes match CUDA allocations of the same shapes."""
    kernel, meta = case.torch("meta", 0)
    _, real = case.torch("cpu", 0)
    assert kernel.compile(*meta).key == kernel.compile(*real).key


def test_torch_each_config_compiles_its_own_kernel():
    keys = {}
    for case in CASES:
        kernel, args = case.torch("meta", 0)
        keys[case.name] = kernel.compile(*args).key
    assert len(set(keys.values())) == len(keys), keys


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_torch_second_shape_compiles_nothing(index, compiles):
    kernel, args = CASES[index].torch("meta", 0)
    first = kernel.compile(*args)
    before = compiles()
    kernel2, args2 = fa4_corpus.build(*SECOND)[index].torch("meta", 0)
    assert kernel2 is kernel  # one launch object per kernel config
    assert kernel2.compile(*args2).key == first.key
    assert compiles() == before


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
def test_jax_flash_attention_and_its_vjp_lower_to_four_calls(causal):
    """FA4's kernels composed into a differentiable JAX function: the
    forward and the three backward kernels, one jitted program."""
    f = fa4_corpus.jax_flash_attention(causal)
    x = jax.ShapeDtypeStruct((SHAPE[0], SHAPE[1], SHAPE[2], fa4_kernels.HDIM),
                             jnp.bfloat16)

    def program(q, k, v, do):
        o, vjp = jax.vjp(f, q, k, v)
        return o, vjp(do)

    text = jax.jit(program).trace(x, x, x, x).lower(
        lowering_platforms=("cuda",)).as_text()
    assert text.count(TARGET) == 4


# ---------------------------------------------------------------------------
# The references

@pytest.mark.usefixtures("cpu_numerics")
@pytest.mark.parametrize("causal", [False, True])
def test_reference_backward_is_the_gradient(causal):
    b, s, h, d = 1, 200, 2, 128
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v, do = (jax.random.normal(x, (b, s, h, d)) for x in keys)
    scale = d ** -0.5
    cfg = fa4_kernels.bwd_config(causal)
    tile_m, swap = cfg.m_block_size, cfg.dQ_swapAB
    o, lse = ref.jax_attention(q, k, v, scale, causal)
    dpsum, lse_log2, acc = ref.jax_preprocess(o, do, lse, tile_m)
    acc, dk, dv = ref.jax_backward(q, k, v, do, lse_log2, dpsum, acc, scale,
                                   causal, tile_m, swap)
    dq = ref.jax_postprocess(acc, scale, s, tile_m, swap)
    def loss(q, k, v):
        return jnp.sum(ref.jax_attention(q, k, v, scale, causal)[0] * do)

    grads = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)
    for got, want in zip((dq, dk, dv), grads):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_dq_accum_order_matches_fa4_layouts(causal):
    """``dq_accum_order`` against the DSL: FA4's postprocess tiled MMA
    (``partition_C``) and the warpgroups' 128-bit accumulator copy
    (``partition_D``), evaluated at trace time for every thread."""
    import cutlass
    import cutlass.cute as cute

    cfg = fa4_kernels.bwd_config(causal)
    tile_m, hdim, swap = cfg.m_block_size, fa4_kernels.HDIM, cfg.dQ_swapAB
    nwg = cfg.num_wg
    post = fa4_kernels.postprocess_kernel(causal)
    chunk = tile_m * hdim // nwg
    coord, offset = {}, {}

    @cute.jit
    def probe():
        mma = post._get_tiled_mma()
        tile = cute.make_identity_tensor(
            (tile_m, hdim) if not swap else (hdim, tile_m))
        copy = cute.make_tiled_copy_tv(
            cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Float32,
                                num_bits_per_copy=128),
            cute.make_layout((128, nwg)), cute.make_layout(4))
        smem = cute.make_identity_tensor((chunk, nwg))
        for t in cutlass.range_constexpr(128 * nwg):
            frag = mma.get_slice(t).partition_C(tile)
            dst = copy.get_slice(t).partition_D(smem)
            for r in cutlass.range_constexpr(cute.size(frag)):
                c, p = frag[r], dst[r]
                coord[t, r] = (int(c[0]), int(c[1]))
                offset[t, r] = int(p[0]) + chunk * int(p[1])

    with dsl_arch(fa4_kernels.ARCH):
        cute.compile(probe)
    order = ref.dq_accum_order(tile_m, hdim, swap, cfg.AtomLayoutMdQ, nwg)
    assert len(offset) == tile_m * hdim
    for tr, j in offset.items():
        m, n = coord[tr]
        row, col = (n, m) if swap else (m, n)
        assert order[j] == row * hdim + col, (tr, j)
