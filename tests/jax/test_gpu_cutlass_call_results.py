"""NVIDIA's ``cutlass_call`` surface (seed 003) on a GPU: every dtype, layout/mode combination, alias case,
launcher signature and runtime scalar produces correct results; a
runtime-scalar sweep compiles once; a column-major input reaches the kernel
with no transpose or copy in the optimized program."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall import TensorSpec
from cutecall.examples import cutlass_call_style, layouts, signatures
from cutecall.examples.signatures import REFERENCES

pytestmark = pytest.mark.gpu
sds = jax.ShapeDtypeStruct


def like(x, *args, **kwargs):
    return sds(x.shape, x.dtype)


def rand(key, shape, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(key), shape, jnp.float32).astype(dtype)


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "float16", "bfloat16", "float32", "float64", "float8_e4m3fn",
          "float8_e5m2", "float8_e8m0fnu", "float8_e4m3", "float8_e4m3b11fnuz",
          "int4", "float4_e2m1fn"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_copies_bit_exactly(dtype, x64):
    d = np.dtype(jnp.dtype(dtype))
    rng = np.random.default_rng(0)
    if dtype == "bool":
        host = rng.integers(0, 2, 1000).astype(bool)
    elif dtype in ("int4", "float4_e2m1fn"):  # packed two per byte on the GPU
        host = (np.arange(1000) % 8).astype(np.int8).astype(d)
    else:
        host = np.frombuffer(rng.bytes(1000 * d.itemsize), dtype=d)
    call = cutecall.cutlass_call(layouts.copy_bits, output_shape_dtype=like,
                                 input_spec=TensorSpec(divisibility=2),
                                 output_spec=TensorSpec(divisibility=2))
    y = np.asarray(call(jnp.asarray(host)))
    assert y.dtype == host.dtype
    if dtype in ("int4", "float4_e2m1fn", "bool"):
        np.testing.assert_array_equal(y.astype(np.float32), host.astype(np.float32))
    else:
        np.testing.assert_array_equal(y.view(np.uint8), host.view(np.uint8))


def test_column_major_input_without_transpose_or_copy():
    call = cutecall.cutlass_call(layouts.copy2d, output_shape_dtype=sds((96, 80), jnp.float32),
                                 input_spec=TensorSpec(layout=(0, 1)))
    f = jax.jit(lambda a: call(a.T))  # a.T of a row-major array is column-major
    a = rand(0, (80, 96))
    np.testing.assert_array_equal(np.asarray(f(a)), np.asarray(a).T)
    hlo = f.lower(a).compile().as_text()
    body = [l for l in hlo.splitlines() if "=" in l and "ENTRY" not in l]
    ops = {m.group(1) for l in body for m in [re.search(r"=\s*\S+\s+(\w[\w-]*)\(", l)] if m}
    assert "transpose" not in ops and "copy" not in ops and "fusion" not in ops, hlo


@pytest.mark.parametrize("mode", [(0, 1, 2), (0, 2, 1), (2, 0, 1), (1, 2, 0)])
def test_3d_mode_permutation(mode):
    x = rand(1, (6, 10, 33))
    out_shape = tuple(x.shape[m] for m in mode)
    call = cutecall.cutlass_call(layouts.copy3d, output_shape_dtype=sds(out_shape, x.dtype),
                                 input_spec=TensorSpec(mode=mode))
    np.testing.assert_array_equal(np.asarray(call(x)), np.transpose(np.asarray(x), mode))


@pytest.mark.parametrize("layout", [(2, 1, 0), (0, 1, 2), (1, 0, 2)])
def test_3d_layouts(layout):
    x = rand(2, (6, 10, 33))
    call = cutecall.cutlass_call(layouts.copy3d, output_shape_dtype=like,
                                 input_spec=TensorSpec(layout=layout))
    np.testing.assert_array_equal(np.asarray(jax.jit(call)(x)), np.asarray(x))


def test_gemm_in_the_seeds_mkl_nkl_mnl_modes():
    # Arrays stored batch-major (L, M, K), (L, K, N), (L, M, N); the kernel
    # sees A as (M, K, L), B as (N, K, L), C as (M, N, L) through modes.
    L_, M, N, K = 3, 40, 72, 24
    a, b = rand(3, (L_, M, K), jnp.float16), rand(4, (L_, K, N), jnp.float16)
    call = cutecall.cutlass_call(
        layouts.gemm_mnkl, output_shape_dtype=sds((L_, M, N), jnp.float32),
        input_spec=(TensorSpec(mode=(1, 2, 0)), TensorSpec(mode=(2, 1, 0))),
        output_spec=TensorSpec(mode=(1, 2, 0)))
    want = np.einsum("lmk,lkn->lmn", np.asarray(a, np.float32), np.asarray(b, np.float32))
    np.testing.assert_allclose(np.asarray(jax.jit(call)(a, b)), want, rtol=2e-3, atol=2e-3)


def test_int_alias_with_donation_writes_in_place():
    call = cutecall.cutlass_call(lambda stream, x: signatures.scale_no_stream(x, 2.0, x),
                                 output_shape_dtype=sds((1000,), jnp.float32),
                                 input_output_aliases={0: 0})
    x = rand(5, (1000,))
    want = 2.0 * np.asarray(x)
    y = jax.jit(call, donate_argnums=0)(x)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-6)


def test_key_path_alias_updates_one_leaf():
    key = jax.tree_util.SequenceKey

    def launcher(stream, x, y, outs):
        layouts.copy1d(stream, y, outs[1])
        signatures.scale_no_stream(x, 3.0, x)  # in place through the input

    call = cutecall.cutlass_call(
        launcher, output_shape_dtype=((sds((500,), jnp.float32),) * 2,),
        input_output_aliases={(key(0),): (key(0), key(0))})
    x, y = rand(6, (500,)), rand(7, (500,))
    (a, b), = jax.jit(call)(x, y)
    np.testing.assert_allclose(np.asarray(a), 3.0 * np.asarray(x), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(b), np.asarray(y))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_signatures(jit):
    x, y = rand(8, (1001,)), rand(9, (1001,))
    nx, ny = np.asarray(x), np.asarray(y)
    cases = [
        (cutecall.cutlass_call(signatures.axpby_stream_last, output_shape_dtype=like),
         (x, y), dict(alpha=2.0, beta=-0.5), REFERENCES["axpby_stream_last"](nx, ny, 2.0, -0.5)),
        (cutecall.cutlass_call(signatures.scale_no_stream, output_shape_dtype=like),
         (x, 0.25), {}, REFERENCES["scale_no_stream"](nx, 0.25)),
        (cutecall.cutlass_call(signatures.scale_outputs_first, output_shape_dtype=like,
                               operand_order="outputs_first", factor=4.0),
         (x,), {}, REFERENCES["scale_outputs_first"](nx, 4.0)),
        (cutecall.cutlass_call(signatures.add_optional_bias, output_shape_dtype=like),
         (x, y), {}, REFERENCES["add_optional_bias"](nx, ny)),
        (cutecall.cutlass_call(signatures.add_optional_bias, output_shape_dtype=like),
         (x, None), {}, REFERENCES["add_optional_bias"](nx, None)),
        (cutecall.cutlass_call(signatures.fill, output_shape_dtype=lambda v: sds((77,), jnp.float32)),
         (2.5,), {}, REFERENCES["fill"]((77,), 2.5)),
        (cutecall.cutlass_call(signatures.scale_default, output_shape_dtype=like),
         (x,), {}, REFERENCES["scale_default"](nx)),
        (cutecall.cutlass_call(signatures.scale_default, output_shape_dtype=like),
         (x, 3.0), {}, REFERENCES["scale_default"](nx, 3.0)),
    ]
    for call, args, kwargs, want in cases:
        if jit:  # arrays traced, scalars and None closed over (host values)
            arrays = [a for a in args if hasattr(a, "shape")]

            def f(*arrs, call=call, args=args, kwargs=kwargs):
                it = iter(arrs)
                return call(*[next(it) if hasattr(a, "shape") else a for a in args],
                            **kwargs)

            got = jax.jit(f)(*arrays)
        else:
            got = call(*args, **kwargs)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_runtime_scalar_sweep_compiles_once(compiles):
    call = cutecall.cutlass_call(signatures.affine, output_shape_dtype=like)
    x = rand(10, (4097,))
    nx = np.asarray(x)
    for v in range(10):
        args = (0.5 * v - 1.0, v * 1000 - 3, 2**33 + v, v % 3 == 0)
        np.testing.assert_allclose(np.asarray(call(x, *args)),
                                   REFERENCES["affine"](nx, *args), rtol=1e-6, atol=1e-3)
    assert compiles() <= 1


def test_cutlass_call_style_module_runs_unchanged():
    a, b = rand(11, (64, 128)), rand(12, (64, 128))
    for name, (got, want) in cutlass_call_style.run_all(a, b).items():
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6,
                                   atol=1e-6, err_msg=name)  # a + c*b may fuse (FMA)
