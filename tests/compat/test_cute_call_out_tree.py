"""``cute_call`` returns the tree of ``out`` (else ``out_shape``): ``call``'s
result is flattened and its leaves fill that tree (seed 001 flattens and
unflattens into ``out``'s tree; its docstring promises ``out_shape``'s too).
The leaves are still checked -- count, type, shape, dtype -- and every error
names the leaf by key path on both sides where the trees differ.

On CPU, pure-JAX callables stand in for kernels (the behaviour is
cute_call's own); one real CuTe DSL kernel is lowered for cuda."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cutecall.ejkernel import build_cute_ffi_call, cute_call

from shared import f32, lowered_text

pytestmark = pytest.mark.usefixtures("single_accelerator")


def i32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


x = jnp.arange(4.0)


# ---------------------------------------------------------------------------
# The result takes the contract's tree

def test_list_result_fills_a_dict_out():  # the brief's example
    got = cute_call(x, call=lambda x: [x * 2], out={"r": jnp.zeros(4)})
    assert list(got) == ["r"]
    np.testing.assert_array_equal(got["r"], np.arange(4.0) * 2)


def test_list_result_fills_a_dict_out_shape():
    got = cute_call(x, call=lambda x: [x + 1, x.astype(jnp.int32)],
                    out_shape={"a": f32(4), "b": i32(4)})
    assert set(got) == {"a", "b"}
    assert got["b"].dtype == jnp.int32
    np.testing.assert_array_equal(got["a"], np.arange(4.0) + 1)


def test_dict_result_fills_a_tuple_in_sorted_key_order():
    got = cute_call(x, call=lambda x: {"b": x.astype(jnp.int32), "a": x + 1},
                    out_shape=(f32(4), i32(4)))
    assert isinstance(got, tuple)
    np.testing.assert_array_equal(got[0], np.arange(4.0) + 1)  # "a" first
    assert got[1].dtype == jnp.int32


def test_nested_trees_are_filled_leaf_by_leaf():
    contract = {"stats": (f32(4), f32()), "y": [f32(2, 2)]}
    got = cute_call(x, call=lambda x: [x * 3, (x.sum(), x.reshape(2, 2))],
                    out_shape=contract)
    assert jax.tree.structure(got) == jax.tree.structure(
        {"stats": (0, 0), "y": [0]})
    np.testing.assert_array_equal(got["stats"][0], np.arange(4.0) * 3)
    assert float(got["stats"][1]) == 6.0
    np.testing.assert_array_equal(got["y"][0], np.arange(4.0).reshape(2, 2))


def test_single_array_for_a_one_leaf_tree_and_back():
    got = cute_call(x, call=lambda x: x + 1, out_shape={"only": [f32(4)]})
    np.testing.assert_array_equal(got["only"][0], np.arange(4.0) + 1)
    got = cute_call(x, call=lambda x: {"k": [x + 1]}, out_shape=f32(4))
    assert isinstance(got, jax.Array)


def test_out_tree_wins_over_out_shape_tree():
    got = cute_call(x, call=lambda x: (x,), out={"k": jnp.zeros(4)},
                    out_shape=[f32(4)])
    assert list(got) == ["k"]


def test_under_jit():
    f = jax.jit(lambda x: cute_call(x, call=lambda x: [x * 2, x - 1],
                                    out_shape={"p": f32(4), "q": f32(4)}))
    got = f(x)
    np.testing.assert_array_equal(got["p"], np.arange(4.0) * 2)
    np.testing.assert_array_equal(got["q"], np.arange(4.0) - 1)


# ---------------------------------------------------------------------------
# Leaves are still checked; errors name the leaf

@pytest.mark.parametrize("call, contract, match", [
    (lambda x: [x], {"r": f32(4), "s": f32(4)},
     r"`call`'s result has 1, `out_shape` has 2 \(nothing for `out_shape`\['s'\]\)"),
    (lambda x: [x, x, x], {"r": f32(4)},
     r"`call`'s result has 3, `out_shape` has 1 \(`call`'s result\[1\], "
     r"`call`'s result\[2\] beyond the contract\)"),
    (lambda x: [x[:2]], {"r": f32(4)},
     r"shape mismatch at index 0 \(`out_shape`\['r'\] vs `call`'s result\[0\]\): "
     r"`call`'s result has shape \(2,\), expected \(4,\)"),
    (lambda x: {"a": x, "b": x}, {"r": f32(4), "s": i32(4)},
     r"dtype mismatch at index 1 \(`out_shape`\['s'\] vs `call`'s result\['b'\]\): "
     r"`call`'s result has dtype float32, expected int32"),
    (lambda x: {"s": (x,)}, {"s": [i32(4)]},
     r"dtype mismatch at index 0 \(output\['s'\]\[0\]\)"),  # same path
], ids=["too-few", "too-many", "shape", "dtype", "same-path"])
def test_mismatches_name_the_leaf(call, contract, match):
    with pytest.raises(ValueError, match=match):
        cute_call(x, call=call, out_shape=contract)


def test_mismatch_against_out_names_out():
    with pytest.raises(ValueError, match=r"`out`\['r'\]\[1\] vs `call`'s result\[1\]"):
        cute_call(x, call=lambda x: [x, x[:1]],
                  out={"r": [jnp.zeros(4), jnp.zeros(4)]})


def test_out_against_out_shape_names_both_leaves():
    with pytest.raises(ValueError, match=r"shape mismatch at index 0 "
                       r"\(`out_shape`\[0\] vs `out`\['k'\]\)"):
        cute_call(x, call=lambda x: x, out={"k": jnp.zeros(3)},
                  out_shape=[f32(4)])


def test_non_array_leaf_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"non-array at output index 1 "
                       r"\(output\['b'\]\): float: 1.0"):
        cute_call(x, call=lambda x: {"a": x, "b": 1.0},
                  out_shape={"a": f32(4), "b": f32()})


def test_named_calls_key_on_the_contract_tree():
    dict_out = cute_call(x, call=lambda x: [x], out_shape={"r": f32(4)}, name="t")
    list_out = cute_call(x, call=lambda x: [x], out_shape=[f32(4)], name="t")
    assert isinstance(dict_out, dict) and isinstance(list_out, list)


# ---------------------------------------------------------------------------
# A real kernel: two outputs returned as a tuple, asked for as a dict

def test_kernel_outputs_fill_a_dict_contract():
    from cutecall.examples import ejkernel_style as ejs

    spec = f32(1000)
    call = build_cute_ffi_call(ejs._build_add_sub_host_fns(),
                               output_shape_dtype=(spec, spec))  # a tuple
    seen = {}

    def f(a, b):
        got = cute_call(a, b, call=call, out_shape={"sum": spec, "diff": spec})
        seen["tree"] = jax.tree.structure(got)
        return got["sum"], got["diff"]

    text = lowered_text(f, spec, spec)
    assert text.count("stablehlo.custom_call @cutecall_call_v1") == 1
    assert seen["tree"] == jax.tree.structure({"sum": 0, "diff": 0})


@pytest.mark.gpu
def test_gpu_kernel_outputs_fill_a_dict_contract():
    from cutecall.examples import ejkernel_style as ejs

    spec = f32(1000)
    call = build_cute_ffi_call(ejs._build_add_sub_host_fns(),
                               output_shape_dtype=(spec, spec))
    a, b = jnp.arange(1000.0), jnp.full(1000, 3.0)
    # Flattening order: "diff" < "sum", so the kernel's (a + b, a - b)
    # lands as diff = a + b, sum = a - b -- by position, as documented.
    got = jax.jit(lambda a, b: cute_call(
        a, b, call=call, out_shape={"sum": spec, "diff": spec}))(a, b)
    np.testing.assert_array_equal(got["diff"], np.arange(1000.0) + 3)
    np.testing.assert_array_equal(got["sum"], np.arange(1000.0) - 3)
