"""cutlass_call on JAX CPU: the API contract, compile counting, errors, and
the HLO lowered for the cuda platform. Real CuTe DSL compiles for sm_90a."""

import hashlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall import TensorSpec
from cutecall._driver.store import memory as compile_cache
from cutecall._driver.pipeline import Launcher
from cutecall._driver.plan import PLAN_VERSION
from cutecall.examples import kernels, layouts


def same_as_first(*args):
    return jax.ShapeDtypeStruct(args[0].shape, args[0].dtype)


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def custom_call_line(lowered) -> str:
    lines = [l for l in lowered.as_text().splitlines()
             if "stablehlo.custom_call" in l and "cutecall" in l]
    assert lines, lowered.as_text()[:2000]
    return lines[0]


def attr(line: str, name: str) -> str:
    m = re.search(name + r' = ("(?:[^"\\]|\\.)*"|dense<[^>]*>)', line)
    assert m, (name, line[:500])
    return m.group(1)


def test_one_compile_per_divisibility_class(compiles):
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first,
                                name="vadd_classes")
    for n in (1, 17, 4099, 1 << 20 | 1):  # odd: class 1
        add.lower(f32(n), f32(n))
    assert compiles() <= 1  # 0 if an earlier test compiled the same spec
    before = compiles()
    for n in (1024, 1 << 20, 12):         # multiples of 4 f32: class 4
        add.lower(f32(n), f32(n))
    assert compiles() - before <= 1
    other = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first)
    n = compiles()
    other.lower(f32(8), f32(8))
    assert compiles() == n  # a second call site shares the compile (content key)


def test_repeated_calls_do_not_retrace(monkeypatch):
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first)
    calls = []
    real = Launcher.specialize
    monkeypatch.setattr(Launcher, "specialize",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    for _ in range(3):
        add.lower(f32(64), f32(64))
    assert len(calls) == 1


def test_new_dtype_or_static_dim_is_a_new_compile(compiles):
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first,
                                name="vadd_f16")
    add.lower(jax.ShapeDtypeStruct((64,), jnp.float16),
              jax.ShapeDtypeStruct((64,), jnp.float16))
    n = compiles()
    static = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first,
                                   input_spec=TensorSpec(static=True))
    static.lower(f32(64), f32(64))
    static.lower(f32(128), f32(128))
    assert compiles() - n in (0, 2)  # two static extents, two compiles


def test_lowered_hlo_carries_target_and_attributes():
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first)
    line = custom_call_line(add.lower(f32(4096), f32(4096)))
    assert "@cutecall_call_v1(" in line
    assert attr(line, "kernel") == '"vector_add"'
    assert attr(line, "operands") == '"a,b,c"'
    assert attr(line, "function").startswith('"cc_')
    key = attr(line, "key").strip('"')
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    plan = [int(v) for v in re.findall(r"-?\d+", attr(line, "plan").split(">")[0][6:])]
    assert plan[:5] == [PLAN_VERSION, 2, 1, 3, 0]
    assert any(k.sha256 == key for k in compile_cache._entries.values())
    for k in compile_cache._entries.values():
        assert hashlib.sha256(k.module).hexdigest() == k.sha256
        assert k.module[:4] == b"\x7fELF"
    assert "mhlo.backend_config = {" in line  # typed FFI attributes


def test_no_cuda_graph_target_and_aliases():
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first,
                                allow_cuda_graph=False)
    assert "@cutecall_call_no_graph_v1(" in custom_call_line(add.lower(f32(8), f32(8)))

    inplace = cutecall.cutlass_call(
        kernels.vector_add,
        output_shape_dtype=lambda a, b: (f32(*a.shape), f32(*a.shape)),
        input_output_aliases={0: 1})
    line = custom_call_line(inplace.lower(f32(8), f32(8)))
    assert "output_operand_aliases" in line
    assert attr(line, "operands") == '"a,b,c"'  # aliased output not passed


def test_jit_of_two_kernels_lowers_two_calls():
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first)
    tr = cutecall.cutlass_call(kernels.transpose,
                               output_shape_dtype=lambda x: f32(*x.shape[::-1]))

    def program(a, b):
        s = add(a.reshape(-1), b.reshape(-1)).reshape(a.shape)
        return tr(s * 2.0)

    text = jax.jit(program).trace(f32(32, 16), f32(32, 16)).lower(
        lowering_platforms=("cuda",)).as_text()
    assert text.count("stablehlo.custom_call @cutecall_call_v1") == 2


def test_constexprs_reach_the_key(compiles):
    outs = lambda x, bias: f32(*x.shape)
    a = cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=outs,
                              alpha=2.0, relu=True)
    b = cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=outs,
                              alpha=3.0, relu=True)
    ka = custom_call_line(a.lower(f32(8, 4), f32(4)))
    kb = custom_call_line(b.lower(f32(8, 4), f32(4)))
    assert attr(ka, "key") != attr(kb, "key")


def test_eager_call_without_gpu_says_so():
    if jax.default_backend() != "cpu":
        pytest.skip("only meaningful without a GPU")
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=same_as_first)
    with pytest.raises(NotImplementedError, match="runs only on CUDA GPUs"):
        add(jnp.ones(4), jnp.ones(4))


@pytest.mark.parametrize("kwargs, args, err, match", [
    (dict(output_shape_dtype=f32(4)), ("not an array", np.ones(4)), TypeError,
     "argument 0 of 'vector_add' must be an array"),
    (dict(output_shape_dtype=[(4,)]), (jnp.ones(4), jnp.ones(4)), TypeError,
     "leaf 0 of 'vector_add' must be a jax.ShapeDtypeStruct"),
    (dict(output_shape_dtype=f32(4), input_output_aliases={5: 0}),
     (jnp.ones(4), jnp.ones(4)), ValueError, "input 5 of 'vector_add' is not an array"),
    (dict(output_shape_dtype=(f32(4), f32(4)), input_output_aliases={0: 1}),
     (jnp.ones(4, jnp.int32), jnp.ones(4)), ValueError,
     r"input \[0\] int32\[4\] of 'vector_add' cannot alias output \[1\]"),
    (dict(output_shape_dtype=f32(4), input_spec=[TensorSpec()]),
     (jnp.ones(4), jnp.ones(4)), ValueError, "input_spec has 1 entries for 2"),
])
def test_call_errors_name_argument_and_value(kwargs, args, err, match):
    add = cutecall.cutlass_call(kernels.vector_add, **kwargs)
    with pytest.raises(err, match=match):
        add.lower(*args)


def test_construction_errors():
    with pytest.raises(TypeError, match="must be a @cute.jit launcher"):
        cutecall.cutlass_call(42, output_shape_dtype=f32(4))
    with pytest.raises(TypeError, match="constexpr 'alpha'.*is an array"):
        cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=f32(4),
                              alpha=np.ones(2))
    with pytest.raises(TypeError, match="input_output_aliases must be a dict"):
        cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=f32(4),
                              input_output_aliases=[(0, 0)])


def test_compile_failure_names_the_kernel():
    missing = cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=f32(8, 4),
                                    alpha=1.0)  # relu missing: caught before compiling
    with pytest.raises(TypeError, match="needs keyword argument 'relu'"):
        missing.lower(f32(8, 4), f32(4))
    add = cutecall.cutlass_call(layouts.copy_bits, output_shape_dtype=f32(8),
                                name="broken", expect="Float64")  # the kernel asserts
    with pytest.raises(cutecall.CompileError, match="kernel 'broken'.*received Float32"):
        add.lower(f32(8))
