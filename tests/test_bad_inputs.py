"""Bad inputs as a newcomer makes them, through both fronts: the JAX front
(``cutecall.cutlass_call``) and the torch front (``cutecall.torch.kernel``).
Each is refused with the error the table gives -- naming the argument (or
key path) and its value -- before anything compiles or launches. No GPU:
JAX lowers for CUDA, torch compiles ``meta`` tensors or launches CPU ones
(refused). The JAX cases skip without JAX, the torch ones without torch
(``tests/without.py`` runs this file with either blocked)."""

import re

import numpy as np
import pytest

import cutecall
from cutecall.examples import kernels, signatures

N = 64


# ---------------------------------------------------------------------------
# The JAX front

def jx():
    jax = pytest.importorskip("jax")
    return jax, jax.numpy


def f32(*shape, dtype="float32"):
    jax, jnp = jx()
    return jax.ShapeDtypeStruct(shape, getattr(jnp, dtype))


def readme_add(**options):
    """README.md's first example: vector_add with the output like `a`."""
    jax, _ = jx()
    return cutecall.cutlass_call(
        kernels.vector_add,
        output_shape_dtype=lambda a, b: jax.ShapeDtypeStruct(a.shape, a.dtype), **options)


def jax_float_for_the_first_array():
    readme_add().lower(2.0, f32(N))      # the README's lambda reads 2.0.shape


def jax_float_for_the_second_array():
    readme_add().lower(f32(N), 2.0)


def jax_output_shape_dtype_gives_two_outputs():
    cutecall.cutlass_call(kernels.vector_add,
                          output_shape_dtype=(f32(N), f32(N))).lower(f32(N), f32(N))


def jax_int32_for_a_float32_kernel():
    readme_add(dtypes={"a": "float32", "b": "float32", "c": "float32"}).lower(
        f32(N), f32(N, dtype="int32"))


def jax_output_of_another_dtype():
    cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=f32(N, dtype="int32"),
                          dtypes={"c": "float32"}).lower(f32(N), f32(N))


def jax_none_where_an_array_is_required():
    readme_add().lower(f32(N), None)


def jax_tuple_where_a_tensor_goes():
    readme_add().lower(f32(N), (f32(N), f32(N)))


def jax_list_of_floats_where_a_tensor_goes():
    readme_add().lower([1.0, 2.0], [3.0, 4.0])


def jax_extra_positional_argument():
    cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=f32(N)).lower(
        f32(N), f32(N), f32(N))


def jax_extra_positional_argument_for_output_shape_dtype():
    readme_add().lower(f32(N), f32(N), f32(N))   # the README's lambda takes 2


def jax_wrong_keyword():
    readme_add().lower(f32(N), f32(N), bogus=1.0)


def jax_mismatched_tied_dims():
    n = cutecall.TensorSpec(dims=("n",))
    readme_add(input_spec=n, output_spec=n).lower(f32(N), f32(10))


def jax_wrong_rank_for_the_declared_dims():
    n = cutecall.TensorSpec(dims=("n",))
    readme_add(input_spec=n, output_spec=n).lower(f32(8, 8), f32(8, 8))


def jax_rank0_array_where_a_tensor_goes():
    readme_add().lower(f32(N), f32())


def jax_traced_value_as_a_runtime_scalar():
    jax, _ = jx()
    affine = cutecall.cutlass_call(signatures.affine, output_shape_dtype=lambda x, *s: x)
    jax.jit(lambda x, scale: affine(x, scale, 1, 2, False)).trace(f32(N), f32())


def jax_array_where_a_runtime_scalar_goes():
    affine = cutecall.cutlass_call(signatures.affine, output_shape_dtype=f32(N))
    affine.lower(f32(N), f32(N), 2, 3, False)


def jax_cpu_array_called_eagerly():
    jax, jnp = jx()
    cpu = jax.device_put(jnp.ones(N), jax.devices("cpu")[0])
    readme_add()(cpu, cpu)


def jax_torch_tensor_passed():
    torch = pytest.importorskip("torch")
    readme_add().lower(torch.ones(N), f32(N))


def jax_unknown_name_in_dtypes():
    readme_add(dtypes={"x": "float32"})


JAX_CASES = [
    (jax_float_for_the_first_array, TypeError,
     r"argument 'a' \(position 0\) of 'vector_add' is the float 2.0, but parameter 'a' is "
     r"annotated as a tensor \(cute.Tensor\): pass an array there.*output_shape_dtype "
     r"raised AttributeError"),
    (jax_float_for_the_second_array, TypeError,
     r"argument 'b' \(position 1\) of 'vector_add' is the float 2.0, but parameter 'b'"),
    (jax_output_shape_dtype_gives_two_outputs, TypeError,
     r"'vector_add' was called with 2 positional argument\(s\) and output_shape_dtype "
     r"gives 2 output\(s\): 4 values for the launcher's 3 array or scalar parameter\(s\) "
     r"\(a, b, c\); 1 too many"),
    (jax_int32_for_a_float32_kernel, TypeError,
     r"argument 'b' of 'vector_add' is int32\[64\], but dtypes= declares float32 for 'b'"),
    (jax_output_of_another_dtype, TypeError,
     r"output 'c' of 'vector_add' is int32\[64\], but dtypes= declares float32 for 'c'; "
     r"give that dtype in output_shape_dtype"),
    (jax_none_where_an_array_is_required, TypeError,
     r"argument 'b' of 'vector_add' is None, but parameter 'b' is annotated cute.Tensor, "
     r"not Optional\[cute.Tensor\]"),
    (jax_tuple_where_a_tensor_goes, TypeError,
     r"argument 'b' \(position 1\) of 'vector_add' is a tuple of 2 \(float32\[64\], "
     r"float32\[64\]\), but parameter 'b' is annotated as one tensor"),
    (jax_list_of_floats_where_a_tensor_goes, TypeError,
     r"argument 'a' \(position 0\) of 'vector_add' is a list of 2 \(1.0, 2.0\)"),
    (jax_extra_positional_argument, TypeError,
     r"called with 3 positional argument\(s\) and output_shape_dtype gives 1 output\(s\): "
     r"4 values .* \(a, b, c\); 1 too many"),
    (jax_extra_positional_argument_for_output_shape_dtype, TypeError,
     r"'vector_add' was called with 3 positional arguments, but its output_shape_dtype "
     r"function .* does not take them"),
    (jax_wrong_keyword, TypeError,
     r"launcher 'vector_add' has no parameter 'bogus' to pass at call time; its "
     r"parameters are a, b, c"),
    (jax_mismatched_tied_dims, ValueError,
     r"operand 'b' dim 0 = 10 must equal operand 'a' dim 0 = 64 \(tied dim 'n'\)"),
    (jax_wrong_rank_for_the_declared_dims, ValueError,
     r"kernel 'vector_add', input 'a': dims must be a name .* of the rank-2 operand, "
     r"got \('n',\)"),
    (jax_rank0_array_where_a_tensor_goes, TypeError,
     r"positional argument 1 \(parameter 'b'\) is a rank-0 array \(float32\[\]\)"),
    (jax_traced_value_as_a_runtime_scalar, TypeError,
     r"argument 'scale' of 'affine' is a traced JAX value \(float32\[\]\); a runtime "
     r"scalar travels with the call as a host value"),
    (jax_array_where_a_runtime_scalar_goes, TypeError,
     r"launcher 'affine' takes 2 tensor parameter\(s\) \(x, out\), but the call passes 2 "
     r"array\(s\) and 1 output\(s\) \(no binding fits the call: float32\[64\], "
     r"float32\[64\], the int 2"),
    (jax_cpu_array_called_eagerly, NotImplementedError,
     r"kernel 'vector_add' runs only on CUDA GPUs, but argument 'a' is on "
     r"\{CpuDevice\(id=0\)\}"),
    (jax_torch_tensor_passed, TypeError,
     r"argument 0 of 'vector_add' is a torch tensor float32\[64\]; cutlass_call takes JAX "
     r"arrays: pass jax.dlpack.from_dlpack\(x\)"),
    (jax_unknown_name_in_dtypes, ValueError,
     r"dtypes names 'x', which is not a parameter of 'vector_add'; its tensor "
     r"parameters are a, b, c"),
]


@pytest.mark.parametrize("call, error, message", [
    pytest.param(c, e, m, id=c.__name__) for c, e, m in JAX_CASES])
def test_jax_bad_input_is_named_before_compiling(call, error, message, compiles):
    jx()  # skips without JAX
    with pytest.raises(error, match=message):
        call()
    assert compiles() == 0


# ---------------------------------------------------------------------------
# The torch front

def tc():
    return pytest.importorskip("torch")


def meta(*shape, dtype="float32"):
    torch = tc()
    return torch.empty(*shape, device="meta", dtype=getattr(torch, dtype))


def cpu(*shape, dtype="float32"):
    torch = tc()
    return torch.zeros(*shape, dtype=getattr(torch, dtype))


def torch_add(**options):
    tc()
    import cutecall.torch
    return cutecall.torch.kernel(kernels.vector_add, **options)


ONE_LENGTH = {"a": ("n",), "b": ("n",), "c": ("n",)}


def torch_float_where_a_tensor_goes():
    torch_add().compile(meta(N), 2.0, meta(N))


def torch_numpy_array_launched():
    torch_add()(np.zeros(N, np.float32), np.zeros(N, np.float32), np.zeros(N, np.float32))


def torch_int32_for_a_float32_kernel():
    torch_add(dtypes={"a": "float32", "b": "float32", "c": "float32"}).compile(
        meta(N), meta(N, dtype="int32"), meta(N))


def torch_cpu_tensor_launched():
    torch_add()(cpu(N), cpu(N), cpu(N))


def torch_none_where_a_tensor_is_required():
    torch_add().compile(meta(N), None, meta(N))


def torch_tuple_where_a_tensor_goes():
    torch_add().compile(meta(N), (meta(N), meta(N)), meta(N))


def torch_extra_positional_argument():
    torch_add()(cpu(N), cpu(N), cpu(N), cpu(N))


def torch_mismatched_tied_dims():
    torch_add(dims=ONE_LENGTH).compile(meta(N), meta(10), meta(N))


def torch_wrong_rank_for_the_declared_dims():
    torch_add(dims=ONE_LENGTH).compile(meta(8, 8), meta(8, 8), meta(8, 8))


def torch_tensor_where_a_runtime_scalar_goes():
    tc()
    import cutecall.torch
    cutecall.torch.kernel(signatures.axpby_stream_last).compile(
        meta(N), meta(N), meta(N), meta(1), 2.0)


def torch_rank0_tensor():
    torch = tc()
    torch_add().compile(meta(N), torch.tensor(1.0), meta(N))


def torch_complex_tensor():
    torch_add().compile(meta(N, dtype="complex64"), meta(N), meta(N))


def torch_overlapping_output():
    torch_add().compile(meta(N), meta(N), meta(1).expand(N))


def torch_jax_array_launched():
    _, jnp = jx()
    torch_add()(jnp.zeros(N), jnp.zeros(N), jnp.zeros(N))


def torch_unknown_name_in_dtypes():
    torch_add(dtypes={"out": "float32"})


def torch_runtime_scalar_named_in_dtypes():
    tc()
    import cutecall.torch
    cutecall.torch.kernel(signatures.axpby_stream_last, dtypes={"alpha": "float32"})


TORCH_CASES = [
    (torch_float_where_a_tensor_goes, TypeError,
     r"argument 'b' \(position 1\) of 'vector_add' is the float 2.0, but parameter 'b' is "
     r"annotated as a tensor \(cute.Tensor\): pass an array there"),
    (torch_numpy_array_launched, TypeError,
     r"argument 'a' of 'vector_add' is a NumPy array float32\[64\]; cutecall.torch launches "
     r"torch tensors on a CUDA device: pass torch.from_numpy\(x\).cuda\(\)"),
    (torch_int32_for_a_float32_kernel, TypeError,
     r"argument 'b' of 'vector_add' is int32\[64\], but dtypes= declares float32 for 'b'; "
     r"convert it .*torch: .to\(torch.float32\)"),
    (torch_cpu_tensor_launched, ValueError,
     r"argument 'a' of 'vector_add' is on cpu; cutecall launches CUDA tensors"),
    (torch_none_where_a_tensor_is_required, TypeError,
     r"argument 'b' of 'vector_add' is None, but parameter 'b' is annotated cute.Tensor"),
    (torch_tuple_where_a_tensor_goes, TypeError,
     r"argument 'b' \(position 1\) of 'vector_add' is a tuple of 2 \(float32\[64\], "
     r"float32\[64\]\)"),
    (torch_extra_positional_argument, TypeError,
     r"launcher 'vector_add' takes 3 array or scalar parameter\(s\) \(a, b, c\), but the "
     r"call passes 4 positional argument\(s\): 1 too many"),
    (torch_mismatched_tied_dims, ValueError,
     r"operand 'b' dim 0 = 10 must equal operand 'a' dim 0 = 64 \(tied dim 'n'\)"),
    (torch_wrong_rank_for_the_declared_dims, ValueError,
     r"'vector_add': dims\['a'\] names 1 dims, but the tensor has rank 2"),
    (torch_tensor_where_a_runtime_scalar_goes, TypeError,
     r"argument 'alpha' of 'axpby_stream_last' is a runtime scalar \(Float32\); pass a "
     r"Python value, got a tensor float32\[1\]"),
    (torch_rank0_tensor, TypeError,
     r"positional argument 1 \(parameter 'b'\) is a rank-0 array \(torch.float32\[\]\)"),
    (torch_complex_tensor, TypeError,
     r"argument 'a' of 'vector_add' has dtype torch.complex64, which has no CuTe DSL type"),
    (torch_overlapping_output, ValueError,
     r"output 'c' of 'vector_add' \(shape \(64,\), strides \(0,\)\) has elements that "
     r"several indices reach"),
    (torch_jax_array_launched, TypeError,
     r"argument 'a' of 'vector_add' is a JAX array float32\[64\]; .* torch.from_dlpack\(x\)"),
    (torch_unknown_name_in_dtypes, ValueError,
     r"dtypes names 'out', which is not a parameter of 'vector_add'; its tensor "
     r"parameters are a, b, c"),
    (torch_runtime_scalar_named_in_dtypes, ValueError,
     r"dtypes names 'alpha' of 'axpby_stream_last', which is a runtime scalar \(Float32\)"),
]


@pytest.mark.parametrize("call, error, message", [
    pytest.param(c, e, m, id=c.__name__) for c, e, m in TORCH_CASES])
def test_torch_bad_input_is_named_before_compiling(call, error, message, compiles):
    tc()  # skips without torch
    with pytest.raises(error, match=message):
        call()
    assert compiles() == 0


def test_every_message_starts_with_cutecall(compiles):
    """Errors are cutecall's own, not a bare AttributeError from a user's
    output_shape_dtype nor Python's binding errors."""
    cases = [(jx, c, e) for c, e, _ in JAX_CASES] + [(tc, c, e) for c, e, _ in TORCH_CASES]
    for front, call, error in cases:
        try:
            front()
            call()
        except pytest.skip.Exception:
            continue
        except error as e:
            assert re.match(r"cutecall: ", str(e)), (call.__name__, str(e))
    assert compiles() == 0
