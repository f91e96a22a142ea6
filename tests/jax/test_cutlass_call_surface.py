"""NVIDIA's ``cutlass.jax.cutlass_call`` (seed 003) walked on JAX CPU: every
argument of the full surface, the launcher signatures users write, runtime
scalars, per-dim control, and each error before launch. Real CuTe DSL
compiles for sm_90a; lowering for the cuda platform needs no GPU."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall import TensorSpec
from cutecall._driver import dtypes
from cutecall._driver.plan import PLAN_VERSION, decode_plan
from cutecall.examples import kernels, layouts, signatures

sds = jax.ShapeDtypeStruct


def f32(*shape):
    return sds(shape, jnp.float32)


def like_first(x, *args, **kwargs):
    return sds(x.shape, x.dtype)


def custom_call(lowered) -> str:
    lines = [l for l in lowered.as_text().splitlines()
             if "stablehlo.custom_call" in l and "cutecall" in l]
    assert len(lines) == 1, lowered.as_text()[:2000]
    return lines[0]


def int_attr(line: str, name: str) -> list[int]:
    m = re.search(name + r" = dense<([^>]*)>", line)
    assert m, (name, line[:400])
    body = m.group(1).strip("[]")
    return [int(v) for v in body.split(",")] if body else []


def plan_dyn_entries(plan: list[int]) -> list[list[tuple]]:
    """Per operand, the (dim, divisibility, symbol) triples of the plan."""
    assert plan[0] == PLAN_VERSION
    return [op["dynamic"] for op in decode_plan(plan)]


# ---------------------------------------------------------------------------
# The seed's arguments

def test_output_shape_dtype_is_required():
    with pytest.raises(ValueError, match="output_shape_dtype"):
        cutecall.cutlass_call(kernels.vector_add)


def test_input_mode_is_deprecated_but_works():
    with pytest.warns(DeprecationWarning, match="input_mode is deprecated"):
        call = cutecall.cutlass_call(layouts.copy2d, output_shape_dtype=f32(8, 4),
                                     input_mode=((1, 0),))
    call.lower(f32(4, 8))  # (4, 8) seen through mode (1, 0) is (8, 4)
    with pytest.warns(DeprecationWarning, match="output_mode is deprecated"):
        cutecall.cutlass_call(layouts.copy2d, output_shape_dtype=f32(4, 8),
                              output_mode=((1, 0),))


def test_spec_and_mode_together_is_an_error():
    with pytest.raises(ValueError, match="input_spec and input_mode"):
        cutecall.cutlass_call(layouts.copy2d, output_shape_dtype=f32(4, 8),
                              input_spec=TensorSpec(), input_mode=((1, 0),))


def test_use_static_tensors_bakes_every_extent(compiles):
    call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first,
                                 use_static_tensors=True)
    line = custom_call(call.lower(f32(96), f32(96)))
    assert plan_dyn_entries(int_attr(line, "plan")) == [[], [], []]
    n = compiles()
    call.lower(f32(160), f32(160))
    assert compiles() - n == 1  # static: one compile per shape
    # A TensorSpec overrides use_static_tensors for its arrays.
    mixed = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first,
                                  use_static_tensors=True,
                                  input_spec=[TensorSpec(static=False), None])
    dyn = plan_dyn_entries(int_attr(custom_call(mixed.lower(f32(96), f32(96))), "plan"))
    assert dyn == [[(0, 4, -1)], [], []]  # dynamic, of 96's class (f32: 4)


def sum_pair(stream, xs, out):
    """A plain function launcher taking a list of tensors."""
    kernels.vector_add(stream, xs[0], xs[1], out)


def test_pytree_inputs_and_spec_pytree():
    # A spec pytree mirroring the arguments: a list with a default entry.
    call = cutecall.cutlass_call(
        sum_pair, output_shape_dtype=lambda xs: sds(xs[0].shape, xs[0].dtype),
        input_spec=([TensorSpec(divisibility=16), None],))
    line = custom_call(call.lower([f32(64), f32(64)]))
    assert re.search(r'operands = "xs\[0\],xs\[1\],out"', line), line[:800]
    dyn = plan_dyn_entries(int_attr(line, "plan"))
    assert dyn[0] == [(0, 16, -1)] and dyn[1] == [(0, 4, -1)]


def test_spec_count_mismatch_names_the_counts():
    call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first,
                                 input_spec=[TensorSpec()])
    with pytest.raises(ValueError, match="input_spec has 1 entries for 2 arrays"):
        call.lower(f32(8), f32(8))


def test_int_alias_removes_the_output_from_the_kernel():
    # copy1d(x, out) aliased {0: 0}: the kernel gets x only as the input and
    # writes through it -- here that means the launcher receives no output,
    # so use a launcher taking (stream, x) via a lambda re-binding.
    call = cutecall.cutlass_call(
        lambda stream, x: layouts.copy1d(stream, x, x),
        output_shape_dtype=f32(32), input_output_aliases={0: 0})
    line = custom_call(call.lower(f32(32)))
    assert "output_operand_aliases" in line
    assert int_attr(line, "plan")[3] == 1  # one tensor operand: the input


def test_key_path_alias_hides_one_output_leaf():
    key = jax.tree_util.SequenceKey

    def launcher(stream, x, y, outs):
        assert outs[0] is None  # the aliased leaf is hidden from the kernel
        layouts.copy1d(stream, y, outs[1])

    call = cutecall.cutlass_call(
        launcher, output_shape_dtype=((f32(16), f32(16)),),
        input_output_aliases={(key(0),): (key(0), key(0))})
    line = custom_call(call.lower(f32(16), f32(16)))
    assert "output_operand_aliases" in line
    assert int_attr(line, "plan")[3] == 3  # x, y, and the one output left


def test_alias_errors():
    with pytest.raises(TypeError, match="must be a dict"):
        cutecall.cutlass_call(kernels.copy, output_shape_dtype=f32(8),
                              input_output_aliases=[(0, 0)])
    with pytest.raises(ValueError, match="two inputs to one output"):
        cutecall.cutlass_call(kernels.copy, output_shape_dtype=f32(8),
                              input_output_aliases={0: 0, 1: 0})
    bad_shape = cutecall.cutlass_call(
        lambda stream, x: None, output_shape_dtype=f32(9),
        input_output_aliases={0: 0})
    with pytest.raises(ValueError, match=r"cannot alias output .*float32\[9\]"):
        bad_shape.lower(f32(8))
    out_of_range = cutecall.cutlass_call(
        lambda stream, x: None, output_shape_dtype=f32(8),
        input_output_aliases={3: 0})
    with pytest.raises(ValueError, match="input 3 .* is not an array argument"):
        out_of_range.lower(f32(8))


def test_ffi_call_target_and_compile_key():
    cutecall.cutlass_call(kernels.copy, output_shape_dtype=f32(8),
                          ffi_call_target="cutecall_call_no_graph_v1")
    with pytest.raises(ValueError, match="ABI differs"):
        cutecall.cutlass_call(kernels.copy, output_shape_dtype=f32(8),
                              ffi_call_target="CuteDSLRT_NvJaxCutlassCall_v2")
    with pytest.raises(TypeError, match="compile_key must be hashable"):
        cutecall.cutlass_call(kernels.copy, output_shape_dtype=f32(8),
                              compile_key=["not", "hashable"])


SIGNED = {"int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
          "float8_e4m3", "float8_e4m3b11fnuz", "int4", "float4_e2m1fn"}
UNSIGNED = {"bool", "uint8", "uint16", "uint32", "uint64"}


@pytest.mark.parametrize("dtype", sorted(SIGNED | UNSIGNED))
def test_every_dtype_reaches_the_kernel(dtype, x64):
    # The kernel checks (at compile time) the element type it received.
    # Unsigned types arrive as the same-width signed type: the DSL's pointer
    # arguments are signless (bits are identical; see docs/migrate).
    expect = dtypes.lookup(dtype)[0] if dtype in SIGNED else None
    call = cutecall.cutlass_call(
        layouts.copy_bits, output_shape_dtype=like_first,
        input_spec=TensorSpec(divisibility=2), output_spec=TensorSpec(divisibility=2),
        expect=expect)
    call.lower(sds((64,), jnp.dtype(dtype)))


def test_unsupported_dtype_names_the_operand():
    call = cutecall.cutlass_call(kernels.copy, output_shape_dtype=like_first)
    with pytest.raises(TypeError, match="kernel 'copy', input 'x' has dtype complex64"):
        call.lower(sds((8,), jnp.complex64))


def test_column_major_layout_is_asked_of_xla():
    call = cutecall.cutlass_call(layouts.copy2d, output_shape_dtype=f32(4, 8),
                                 input_spec=TensorSpec(layout=(0, 1)))
    line = custom_call(call.lower(f32(4, 8)))
    # XLA minor-to-major [0, 1]: dim 0 is fastest (column-major).
    assert re.search(r"operand_layouts = \[dense<\[0, 1\]>", line), line[:600]


# ---------------------------------------------------------------------------
# Launcher signatures

def test_stream_last_with_keyword_scalars():
    call = cutecall.cutlass_call(signatures.axpby_stream_last, output_shape_dtype=like_first)
    line = custom_call(call.lower(f32(100), f32(100), alpha=2.0, beta=0.5))
    assert int_attr(line, "scalars") == [
        int(np.float32(2.0).view(np.int32)), int(np.float32(0.5).view(np.int32))]
    assert int_attr(line, "plan")[4] == 2  # num_scalars


def test_no_stream_parameter():
    call = cutecall.cutlass_call(signatures.scale_no_stream, output_shape_dtype=like_first)
    line = custom_call(call.lower(f32(100), 3.0))
    assert int_attr(line, "scalars") == [int(np.float32(3.0).view(np.int32))]


def test_outputs_first_and_constexpr_default(compiles):
    call = cutecall.cutlass_call(signatures.scale_outputs_first,
                                 output_shape_dtype=like_first,
                                 operand_order="outputs_first")
    line = custom_call(call.lower(f32(100)))
    # The input reached parameter x, the output parameter out (declared first).
    assert '"x,out"' in re.search(r'operands = ("[^"]*")', line).group(1)
    with pytest.raises(ValueError, match="operand_order"):
        cutecall.cutlass_call(signatures.scale_outputs_first,
                              output_shape_dtype=like_first, operand_order="any")


def test_optional_tensor_as_none_is_its_own_compile(compiles):
    call = cutecall.cutlass_call(signatures.add_optional_bias, output_shape_dtype=like_first)
    with_bias = custom_call(call.lower(f32(100), f32(100)))
    without = custom_call(call.lower(f32(100), None))
    assert int_attr(with_bias, "plan")[3] == 3 and int_attr(without, "plan")[3] == 2


def test_unannotated_python_scalar_is_a_runtime_float32():
    call = cutecall.cutlass_call(signatures.fill, output_shape_dtype=lambda v: f32(10))
    line = custom_call(call.lower(2.5))
    assert int_attr(line, "scalars") == [int(np.float32(2.5).view(np.int32))]


def test_signature_errors():
    with pytest.raises(TypeError, match="has no parameter 'factr'"):
        cutecall.cutlass_call(signatures.scale_outputs_first,
                              output_shape_dtype=like_first, factr=2.0)
    call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first)
    with pytest.raises(TypeError, match=r"called with 3 positional argument\(s\) and "
                                        r"output_shape_dtype gives 1 output\(s\): 4 values "
                                        r"for the launcher's 3 .* \(a, b, c\); 1 too many"):
        call.lower(f32(8), f32(8), f32(8))
    with pytest.raises(TypeError, match="has no parameter 'alpha' to pass"):
        call.lower(f32(8), f32(8), alpha=1.0)
    axpby = cutecall.cutlass_call(signatures.axpby_stream_last, output_shape_dtype=like_first)
    with pytest.raises(TypeError, match="parameter 'beta' receives no value"):
        axpby.lower(f32(8), f32(8), alpha=1.0)
    with pytest.raises(TypeError, match="must be passed positionally"):
        axpby.lower(f32(8), alpha=1.0, beta=2.0, y=jnp.zeros(8))
    with pytest.raises(TypeError, match="given to cutlass_call.*as a constexpr"):
        cutecall.cutlass_call(signatures.scale_outputs_first, output_shape_dtype=like_first,
                              operand_order="outputs_first", factor=2.0
                              ).lower(f32(8), factor=3.0)


# ---------------------------------------------------------------------------
# Runtime scalars

def test_runtime_scalar_sweep_compiles_once(compiles):
    call = cutecall.cutlass_call(signatures.affine, output_shape_dtype=like_first)
    seen = set()
    for v in range(10):
        line = custom_call(call.lower(f32(64), 0.5 * v, v - 5, 2**40 + v, v % 2 == 0))
        bits = int_attr(line, "scalars")
        assert bits == [int(np.float32(0.5 * v).view(np.int32)), v - 5, 2**40 + v,
                        int(v % 2 == 0)]
        seen.add(tuple(bits))
    assert len(seen) == 10
    assert compiles() <= 1


def test_scalar_default_compiles_as_its_annotated_type(compiles):
    # alpha: cutlass.Float32 = 0.5, left out: the kernel gets Float32(0.5)
    # (compiled in, no runtime scalar); passed: a runtime scalar, one
    # compile for every value.
    call = cutecall.cutlass_call(signatures.scale_default, output_shape_dtype=like_first)
    line = custom_call(call.lower(f32(64)))
    assert int_attr(line, "scalars") == []
    assert compiles() == 1
    for v in (1.0, 2.0, 3.0):
        line = custom_call(call.lower(f32(64), v))
        assert int_attr(line, "scalars") == [int(np.float32(v).view(np.int32))]
    assert compiles() == 2


def test_runtime_scalar_errors():
    call = cutecall.cutlass_call(signatures.affine, output_shape_dtype=like_first)
    with pytest.raises(ValueError, match=r"'shift' \(Int32\) = 4294967296 is out of range"):
        call.lower(f32(8), 1.0, 2**32, 0, False)
    with pytest.raises(TypeError, match=r"'shift' \(Int32\) must be an int"):
        call.lower(f32(8), 1.0, 1.5, 0, False)
    with pytest.raises(TypeError, match=r"'negate' \(Boolean\) must be a bool"):
        call.lower(f32(8), 1.0, 1, 0, 7)
    with pytest.raises(ValueError, match=r"\(Float32\) = 1e\+40 is out of range for Float32"):
        call.lower(f32(8), 1e40, 1, 0, False)  # not a silent inf
    call.lower(f32(8), float("inf"), 1, 0, False)  # inf and NaN are values
    call.lower(f32(8), float("nan"), 1, 0, False)
    with pytest.raises(TypeError, match="is a traced JAX value"):
        jax.jit(lambda x, s: call(x, s, 1, 0, False)).trace(jnp.zeros(8), 1.0)
    # A concrete JAX scalar is a host value: fine.
    call.lower(f32(8), jnp.float32(1.0), np.int32(1), 0, np.bool_(True))


# ---------------------------------------------------------------------------
# Per-dim control

def test_per_dim_static_and_divisibility():
    call = cutecall.cutlass_call(
        layouts.copy2d, output_shape_dtype=like_first,
        input_spec=TensorSpec(static=(True, False), divisibility=(1, 8)))
    line = custom_call(call.lower(f32(6, 64)))
    plan = int_attr(line, "plan")
    assert plan[5 + 6:5 + 6 + 3] == [1, 0, 6]  # dim 0 static = 6
    assert plan_dyn_entries(plan)[0] == [(1, 8, -1)]
    with pytest.raises(ValueError, match="kernel 'copy2d', input 'x': dim 0 = 6 is not "
                                         "divisible by 4"):
        cutecall.cutlass_call(layouts.copy2d, output_shape_dtype=like_first,
                              input_spec=TensorSpec(static=True, divisibility=4)
                              ).lower(f32(6, 64))


def test_tied_dims_share_one_symbol():
    n = TensorSpec(dims=("n",))
    call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=like_first,
                                 input_spec=n, output_spec=n)
    line = custom_call(call.lower(f32(100), f32(100)))
    assert plan_dyn_entries(int_attr(line, "plan")) == [[(0, 4, 0)]] * 3
    assert '"n"' in re.search(r'symbols = ("[^"]*")', line).group(1)
    with pytest.raises(ValueError, match=r"operand 'b' dim 0 = 101 must equal operand 'a' dim 0 = 100 \(tied dim 'n'\)"):
        call.lower(f32(100), f32(101))


def test_tied_dim_static_anywhere_is_static_everywhere():
    call = cutecall.cutlass_call(
        kernels.vector_add, output_shape_dtype=like_first,
        input_spec=[TensorSpec(dims=("n",), static=True), TensorSpec(dims=("n",))],
        output_spec=TensorSpec(dims=("n",)))
    assert plan_dyn_entries(int_attr(custom_call(call.lower(f32(64), f32(64))), "plan")) \
        == [[], [], []]


def test_dims_must_match_rank():
    call = cutecall.cutlass_call(kernels.copy, output_shape_dtype=like_first,
                                 input_spec=TensorSpec(dims=("m", "n")))
    with pytest.raises(ValueError, match="dims must be a name"):
        call.lower(f32(8))


# ---------------------------------------------------------------------------
# Errors before launch

def test_constexpr_errors():
    with pytest.raises(TypeError, match=r"constexpr 'alpha' = \{'a': 1\} is not hashable"):
        cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=like_first,
                              alpha={"a": 1}, relu=True)
    with pytest.raises(TypeError, match="is an array"):
        cutecall.cutlass_call(kernels.scale_bias_act, output_shape_dtype=like_first,
                              alpha=jnp.ones(3), relu=True)


def test_output_contract_errors():
    call = cutecall.cutlass_call(kernels.copy, output_shape_dtype=lambda x: (x.shape,))
    with pytest.raises(TypeError, match="output_shape_dtype leaf 0 .* must be a jax.ShapeDtypeStruct"):
        call.lower(f32(8))


def test_bad_argument_names_its_position():
    call = cutecall.cutlass_call(kernels.copy, output_shape_dtype=like_first)
    with pytest.raises(TypeError, match="argument 0 of 'copy' must be an array"):
        call("not an array")


def test_layout_and_mode_must_be_permutations():
    for spec, msg in ((TensorSpec(layout=(0, 0)), "layout"), (TensorSpec(mode=(2, 0)), "mode")):
        call = cutecall.cutlass_call(layouts.copy2d, output_shape_dtype=like_first,
                                     input_spec=spec)
        with pytest.raises(ValueError, match=f"kernel 'copy2d', input 'x': {msg} .* is not "
                                             f"a permutation"):
            call.lower(f32(4, 4))


def test_a_call_its_output_function_cannot_take_names_the_count():
    call = cutecall.cutlass_call(kernels.vector_add,
                                 output_shape_dtype=lambda a, b: a)
    with pytest.raises(TypeError, match=r"'vector_add' was called with 1 positional "
                                        r"arguments, but its output_shape_dtype function"):
        call.lower(f32(8))
