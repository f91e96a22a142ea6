"""NVIDIA's CuTe DSL JAX tutorials, with ``cutlass.jax`` replaced by
``cutecall`` and nothing else changed.

The tutorials live in NVIDIA/cutlass, ``examples/python/CuTeDSL/
dsl_tutorials/jax/`` (read at 7107b05). No tutorial code is copied here:
each test writes its own small kernels and calls that use exactly the API
surface the tutorial uses -- the same cutecall names, arguments and call
patterns, written as ``import cutecall as cjax`` where the tutorial has
``import cutlass.jax as cjax``. On CPU the calls compile for sm_90a and lower
for the ``cuda`` platform (``jax.export`` needs ``platforms=["cuda"]`` for
that, the one deviation); ``gpu`` tests run them against JAX references.
"""

import operator
import os
import textwrap
from functools import partial
from typing import List

import jax
import jax.numpy as jnp
import numpy as np
import pytest

cute = pytest.importorskip("cutlass.cute")
import cuda.bindings.driver as cuda  # noqa: E402
import cutlass  # noqa: E402

import cutecall as cjax  # noqa: E402  (the tutorials: import cutlass.jax as cjax)
import cutecall.testing as testing  # noqa: E402  (was: cutlass.jax.testing)

from shared import run_on_cpu_devices  # noqa: E402

SEEN = []  # what launchers saw while the DSL traced them


@pytest.fixture
def fresh(monkeypatch):
    """Every specialization compiles in this test (store off, memory
    cleared), so launchers are traced and record into SEEN."""
    monkeypatch.setenv("CUTECALL_CACHE", "0")
    cjax.clear_cache()
    SEEN.clear()
    return SEEN


def traced(seen: list) -> list:
    """What the launchers saw, once per compile: a call that names no
    outputs is traced once more just before (the output placement's
    question, ``cutecall._driver.outputs.stage``), and sees the same."""
    return [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]


def lower(jitted, *args, **kwargs) -> str:
    return jitted.trace(*args, **kwargs).lower(lowering_platforms=("cuda",)).as_text()


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def unit_stride_at(layout) -> int:
    """Index of the stride-1 mode of a layout printed ``(shape):(stride)``."""
    strides = layout.split("):(")[1].rstrip(")").split(",")
    return [s.strip() for s in strides].index("1")


# ---------------------------------------------------------------------------
# cutlass_call_basic.py -- cjax.cutlass_call, cjax.TensorSpec: keyword
# constexprs from static_argnums, a lambda re-binding the launcher's own
# parameter order, use_static_tensors, per-array specs (mode, static, None),
# aliased outputs with donation.

@cute.jit
def _record(A: cute.Tensor, B: cute.Tensor, x: cute.Int32, y: cute.Int32,
            C: cute.Tensor, D: cute.Tensor, stream: cuda.CUstream):
    # strings now: the layouts are IR values of a context that ends with the trace
    SEEN.append(dict(A=str(A.layout), B=str(B.layout), C=str(C.layout),
                     D=str(D.layout), x=x, y=y))


@cute.jit
def _record_stream_first(stream: cuda.CUstream, A: cute.Tensor, B: cute.Tensor,
                         C: cute.Tensor, D: cute.Tensor, *, x: cute.Int32,
                         y: cute.Int32):
    _record(A, B, x, y, C, D, stream)


@cute.jit
def _record_in_place(A: cute.Tensor, B: cute.Tensor, x: cute.Int32,
                     y: cute.Int32, stream: cuda.CUstream):
    SEEN.append(dict(A=str(A.layout), B=str(B.layout), x=x, y=y))


A3, B4 = f32(512, 32, 64), f32(1, 256, 64, 128)


def _two_like(a, b):
    return (jax.ShapeDtypeStruct(a.shape, a.dtype),
            jax.ShapeDtypeStruct(b.shape, a.dtype))


def test_basic_keyword_constexprs_from_static_argnums(fresh):
    @partial(jax.jit, static_argnums=[2, 3])
    def run(a, b, x, y):
        return cjax.cutlass_call(_record_stream_first,
                                 output_shape_dtype=_two_like(a, b), x=x, y=y)(a, b)

    assert "@cutecall_call_v1(" in lower(run, A3, B4, 0, 1)
    seen, = traced(fresh)
    assert (seen["x"], seen["y"]) == (0, 1)
    assert "?" in seen["A"]  # dynamic by default
    assert unit_stride_at(seen["A"]) == 2 and unit_stride_at(seen["D"]) == 3


def test_basic_lambda_rebinds_the_signature(fresh):
    @partial(jax.jit, static_argnums=[2, 3])
    def run(a, b, x, y):
        return cjax.cutlass_call(
            lambda stream, a, b, c, d, *, x, y: _record(a, b, x, y, c, d, stream),
            output_shape_dtype=_two_like(a, b), x=x, y=y)(a, b)

    assert "@cutecall_call_v1(" in lower(run, A3, B4, 1, 2)
    assert [(s["x"], s["y"]) for s in traced(fresh)] == [(1, 2)]


def test_basic_static_tensors(fresh):
    @partial(jax.jit, static_argnums=[2, 3])
    def run(a, b, x, y):
        return cjax.cutlass_call(
            lambda stream, a, b, c, d, *, x, y: _record(a, b, x, y, c, d, stream),
            output_shape_dtype=_two_like(a, b), use_static_tensors=True,
            x=x, y=y)(a, b)

    lower(run, A3, B4, 3, 4)
    seen, = traced(fresh)
    assert seen["A"] == "(512,32,64):(2048,64,1)"
    assert seen["D"] == "(1,256,64,128):(2097152,8192,128,1)"


def test_basic_per_array_specs(fresh):
    @partial(jax.jit, static_argnums=[2, 3])
    def run(a, b, x, y):
        return cjax.cutlass_call(
            lambda stream, a, b, c, d, *, x, y: _record(a, b, x, y, c, d, stream),
            output_shape_dtype=_two_like(a, b),
            input_spec=(cjax.TensorSpec(mode=(1, 0, 2), static=True),
                        cjax.TensorSpec(mode=(3, 1, 2, 0))),
            output_spec=(None, cjax.TensorSpec(mode=(0, 1, 3, 2))),
            x=x, y=y)(a, b)

    lower(run, A3, B4, 5, 6)
    seen, = traced(fresh)
    assert seen["A"] == "(32,512,64):(64,2048,1)"  # a view: modes swapped
    assert unit_stride_at(seen["B"]) == 0   # the last dim, moved first
    assert unit_stride_at(seen["C"]) == 2   # None: the default
    assert unit_stride_at(seen["D"]) == 2   # the last dim, moved third


def test_basic_aliased_outputs_with_donation(fresh):
    @partial(jax.jit, static_argnums=[2, 3], donate_argnums=[0, 1])
    def run(a, b, x, y):
        return cjax.cutlass_call(
            lambda stream, a, b, *, x, y: _record_in_place(a, b, x, y, stream),
            output_shape_dtype=(jax.ShapeDtypeStruct(a.shape, a.dtype),
                                jax.ShapeDtypeStruct(b.shape, b.dtype)),
            input_output_aliases={0: 0, 1: 1}, x=x, y=y)(a, b)

    text = lower(run, A3, B4, 7, 8)
    assert "output_operand_aliases" in text
    assert [(s["x"], s["y"]) for s in fresh] == [(7, 8)]


# ---------------------------------------------------------------------------
# cutlass_call_export.py -- cutlass_call, get_export_disabled_safety_checks,
# TensorSpec(divisibility=...), cutlass.jax.testing.create_tensor;
# output_shape_dtype given as the input array; concrete, symbolic and
# divisible-symbolic exports, serialized and deserialized.

@cute.kernel
def _add_2d_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    rows, cols = c.shape
    flat = bidx * 128 + tidx
    if flat < rows * cols:
        c[flat // cols, flat % cols] = a[flat // cols, flat % cols] + \
            b[flat // cols, flat % cols]


@cute.jit
def _add_2d(stream: cuda.CUstream, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    rows, cols = c.shape
    _add_2d_kernel(a, b, c).launch(grid=((rows * cols + 127) // 128, 1, 1),
                                   block=(128, 1, 1), stream=stream)


@jax.jit
def _sigmoid_add(a, b):
    return jax.nn.sigmoid(cjax.cutlass_call(_add_2d, output_shape_dtype=a)(a, b))


@jax.jit
def _sigmoid_add_divisible(a, b):
    spec = cjax.TensorSpec(divisibility=(32, 16))
    call = cjax.cutlass_call(_add_2d, output_shape_dtype=a,
                             input_spec=(spec, spec), output_spec=spec)
    return jax.nn.sigmoid(call(a, b))


EXPORTS = [(_sigmoid_add, "512, 256"), (_sigmoid_add, "a, b"),
           (_sigmoid_add_divisible, "32*M, 16*N")]


def _export(fn, dims: str):
    shape = jax.export.symbolic_shape(dims)
    spec = jax.ShapeDtypeStruct(shape, jnp.float32)
    exported = jax.export.export(
        fn, platforms=["cuda"],  # the tutorial exports for the default backend
        disabled_checks=cjax.get_export_disabled_safety_checks())(spec, spec)
    return jax.export.deserialize(exported.serialize())


@pytest.mark.parametrize("fn, dims", EXPORTS, ids=["concrete", "symbolic", "divisible"])
def test_export_serializes_and_deserializes(fn, dims):
    pytest.importorskip("flatbuffers", reason="jax.export serialization needs it")
    back = _export(fn, dims)
    assert str(back.in_avals[0]) == f"float32[{dims.replace(' ', '')}]"
    assert back.platforms == ("cuda",)
    assert back.mlir_module().count("@cutecall_call_v1(") == 1


@pytest.mark.gpu
@pytest.mark.parametrize("fn, dims", EXPORTS, ids=["concrete", "symbolic", "divisible"])
def test_gpu_exported_calls_match_jax(fn, dims):
    back = _export(fn, dims)
    ka, kb = jax.random.split(jax.random.key(1123))
    shapes = [(512, 256)] if dims[0] == "5" else [(512, 256), (1024, 512)]
    for shape in shapes:
        a = testing.create_tensor(shape, dtype=jnp.float32, key=ka)
        b = testing.create_tensor(shape, dtype=jnp.float32, key=kb)
        np.testing.assert_allclose(back.call(a, b), jax.nn.sigmoid(a + b),
                                   rtol=1e-6)


# ---------------------------------------------------------------------------
# cutlass_call_sharding.py -- cutlass_call(use_static_tensors=True) per
# shard under jax.shard_map (explicit mesh axes) and custom_partitioning;
# cutlass.jax.testing.create_tensor.

@cute.kernel
def _add_3d_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    for i in cutlass.range_constexpr(cute.size(c, mode=[0])):
        c[i, tidx, bidx] = a[i, tidx, bidx] + b[i, tidx, bidx]


@cute.jit
def _add_3d(stream: cuda.CUstream, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    _add_3d_kernel(a, b, c).launch(grid=[c.shape[2], 1, 1], block=[c.shape[1], 1, 1],
                                   stream=stream)


def _per_shard(a, b):
    call = cjax.cutlass_call(_add_3d, use_static_tensors=True,
                             output_shape_dtype=jax.ShapeDtypeStruct(a.shape, a.dtype))
    return call(a, b), a + b


SHARDED = """
    from functools import partial
    import jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
    from jax.experimental.custom_partitioning import custom_partitioning
    from test_nvidia_examples import _per_shard

    devices = globals().get("devices") or jax.devices()  # the mesh's devices
    n = len(devices)
    mesh = jax.make_mesh((n,), "b", axis_types=(AxisType.Explicit,),
                         devices=devices)
    spec = P("b", None, None)

    @jax.jit
    def with_shard_map(a, b):
        return jax.shard_map(_per_shard, mesh=mesh, in_specs=(spec, spec),
                             out_specs=(spec, spec))(a, b)

    @custom_partitioning
    def partitioned(a, b):
        return _per_shard(a, b)

    def partition(mesh, arg_shapes, result_shape):
        shardings = jax.tree.map(lambda s: s.sharding, arg_shapes)
        return mesh, _per_shard, (shardings[0],) * len(result_shape), shardings

    partitioned.def_partition(partition)
    x = jax.ShapeDtypeStruct((8 * n, 16, 32), jnp.float32,
                             sharding=NamedSharding(mesh, spec))
    lower = lambda f: f.trace(x, x).lower(lowering_platforms=("cuda",)).as_text()
    text = lower(with_shard_map)
    calls = [l for l in text.splitlines() if "@cutecall_call_v1(" in l]
    results["shard_map"] = [len(calls),  # on the per-shard block
                            all("tensor<8x16x32xf32>" in l for l in calls)]
    text = lower(jax.jit(partitioned))
    results["custom_partitioning"] = [text.count("@cutecall_call_v1("),
                                      "CustomSPMDPartitioning" in text]
"""


def test_sharding_on_one_device():
    # A one-device mesh, however many devices the host has (a 2- or 4-GPU
    # host would otherwise partition over all of them).
    results = {}
    exec(textwrap.dedent(SHARDED), {"results": results,
                                    "devices": jax.devices()[:1]})
    assert results["shard_map"] == [1, True]
    # one device: custom_partitioning lowers its body in place
    assert results["custom_partitioning"] == [1, False]


def test_sharding_on_two_devices():
    here = os.path.dirname(os.path.abspath(__file__))
    results = run_on_cpu_devices(f"import sys; sys.path.insert(0, {here!r})\n"
                                 + textwrap.dedent(SHARDED), n=2)
    assert results["shard_map"] == [1, True]  # one kernel, on (8,16,32) shards
    # two devices: the body is lowered when XLA partitions (a GPU compile)
    assert results["custom_partitioning"] == [0, True]


@pytest.mark.gpu
def test_gpu_sharding_matches_jax():
    results = {}
    code = textwrap.dedent(SHARDED) + textwrap.dedent("""
        ka, kb = jax.random.split(jax.random.key(1123))
        shape, sharding = (8 * n, 16, 32), NamedSharding(mesh, spec)
        a = jax.device_put(testing.create_tensor(shape, jnp.float32, ka), sharding)
        b = jax.device_put(testing.create_tensor(shape, jnp.float32, kb), sharding)
        results["ok"] = [bool(jnp.allclose(*with_shard_map(a, b))),
                         bool(jnp.allclose(*jax.jit(partitioned)(a, b)))]
    """)
    exec(code, {"results": results, "testing": testing})
    assert results["ok"] == [True, True]


# ---------------------------------------------------------------------------
# elementwise_apply_example.py -- cutlass_call with a lambda binding
# (stream, inputs, output, *, op) to the launcher, a *list* of arrays as one
# argument (a list of tensors in the kernel), a Python callable as a
# constexpr (operator.add, functools.partial of a dsl_user_op),
# cjax.cutlass_to_jax_dtype(cutlass.Float32), testing.create_tensor.

@cute.kernel
def _apply_kernel(op: cutlass.Constexpr, inputs: List[cute.Tensor], out: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bidy = cute.arch.block_idx()[1]
    at = ((None, None), (bidx, bidy * 32 + tidx))  # 4 elements per thread
    tiles = [cute.zipped_divide(t, (1, 4))[at] for t in inputs]
    cute.zipped_divide(out, (1, 4))[at].store(op(*[t.load() for t in tiles]))


@cute.jit
def _apply(op: cutlass.Constexpr, inputs, out: cute.Tensor, stream: cuda.CUstream):
    SEEN.append(len(inputs))
    rows, cols = out.shape
    _apply_kernel(op, inputs, out).launch(grid=[rows, cols // 128, 1],
                                          block=[32, 1, 1], stream=stream)


@cutlass.dsl_user_op
def _leaky(x, alpha, *, loc=None, ip=None):
    return cute.where(x > 0, x, alpha * x, loc=loc, ip=ip)


@partial(jax.jit, static_argnums=[1])
def _apply_jax(inputs, op):
    return cjax.cutlass_call(
        lambda stream, inputs, output, *, op: _apply(op, inputs, output, stream),
        output_shape_dtype=jax.ShapeDtypeStruct(inputs[0].shape, inputs[0].dtype),
        op=op)(inputs)


OPS = [(operator.add, 2, operator.add), (operator.mul, 2, operator.mul),
       (partial(_leaky, alpha=0.01), 1, lambda x: jnp.where(x > 0, x, 0.01 * x))]


def test_elementwise_apply_dtype_and_inputs():
    dtype = cjax.cutlass_to_jax_dtype(cutlass.Float32)
    assert dtype == jnp.float32
    keys = jax.random.split(jax.random.key(1435), 2)
    inputs = [testing.create_tensor((256, 128), dtype, k) for k in keys]
    assert all(x.shape == (256, 128) and x.dtype == jnp.float32 for x in inputs)


def test_elementwise_apply_one_compile_per_op(fresh, compiles):
    spec = f32(256, 128)
    for op, arity, _ in OPS:
        assert "@cutecall_call_v1(" in lower(_apply_jax, [spec] * arity, op)
    # the list reached the kernel: traced for the output placement, then compiled
    assert fresh == [2, 2, 2, 2, 1, 1] and compiles() == 3
    lower(_apply_jax, [f32(512, 256)] * 2, operator.add)  # new shape: dynamic
    assert compiles() == 3


@pytest.mark.gpu
@pytest.mark.parametrize("op, arity, ref", OPS, ids=["add", "mul", "leaky_relu"])
def test_gpu_elementwise_apply_matches_jax(op, arity, ref):
    dtype = cjax.cutlass_to_jax_dtype(cutlass.Float32)
    keys = jax.random.split(jax.random.key(1435), arity)
    inputs = [testing.create_tensor((256, 128), dtype, k) for k in keys]
    np.testing.assert_allclose(_apply_jax(inputs, op), ref(*inputs), rtol=1e-6)


# ---------------------------------------------------------------------------
# cute_dsl_jax_kernels.py + cute_dsl_jax.ipynb -- cjax.cutlass_call with
# keyword-only constexprs annotated float / int (alpha=, N=, width=),
# use_static_tensors=True on rank-3 views, get_export_disabled_safety_checks
# (covered above).

@cute.kernel
def _axpy_kernel(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor, alpha: float):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    for i in cutlass.range_constexpr(cute.size(out, mode=[0])):
        out[i, tidx, bidx] = alpha * x[i, tidx, bidx] + y[i, tidx, bidx]


@cute.jit
def _axpy(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor, out: cute.Tensor,
          *, alpha: float):
    SEEN.append(alpha)
    _axpy_kernel(x, y, out, alpha).launch(grid=[out.shape[2], 1, 1],
                                          block=[out.shape[1], 1, 1], stream=stream)


@cute.kernel
def _clamp_kernel(x: cute.Tensor, out: cute.Tensor, N: int):
    i = cute.arch.block_idx()[0] * 256 + cute.arch.thread_idx()[0]
    if i < N:
        out[i] = cutlass.max(x[i], cutlass.Float32(0.0))


@cute.jit
def _clamp(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor, *, N: int):
    SEEN.append(N)
    _clamp_kernel(x, out, N).launch(grid=[(N + 255) // 256, 1, 1], block=[256, 1, 1],
                                    stream=stream)


@partial(jax.jit, static_argnums=(2,))
def _axpy_jax(x, y, alpha):
    call = cjax.cutlass_call(_axpy, use_static_tensors=True, alpha=alpha,
                             output_shape_dtype=jax.ShapeDtypeStruct(x.shape, x.dtype))
    return call(x, y)


@jax.jit
def _relu_jax(x):
    flat = x.reshape(-1)
    call = cjax.cutlass_call(_clamp, N=flat.size,
                             output_shape_dtype=jax.ShapeDtypeStruct(flat.shape, flat.dtype))
    return call(flat).reshape(x.shape)


def test_notebook_float_and_int_keyword_constexprs(fresh, compiles):
    lower(_axpy_jax, f32(1, 256, 4), f32(1, 256, 4), 2.5)
    lower(_axpy_jax, f32(1, 256, 4), f32(1, 256, 4), 0.5)  # a constexpr: compiles
    lower(_relu_jax, f32(64, 32))
    assert traced(fresh) == [2.5, 0.5, 2048] and compiles() == 3


@pytest.mark.gpu
def test_gpu_notebook_kernels_match_jax():
    x = jax.random.normal(jax.random.key(0), (1, 256, 4), jnp.float32)
    y = jax.random.normal(jax.random.key(1), (1, 256, 4), jnp.float32)
    np.testing.assert_allclose(_axpy_jax(x, y, 2.5), 2.5 * x + y, rtol=1e-5,
                               atol=1e-6)  # fused multiply-add vs XLA's
    z = jax.random.normal(jax.random.key(2), (64, 32), jnp.float32)
    np.testing.assert_array_equal(_relu_jax(z), jax.nn.relu(z))
