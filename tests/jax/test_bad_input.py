"""Bad input through the JAX front: each gets an error naming the argument
and its value, before any compile where the call alone shows it is bad, and
after one failed compile (never again for the same call) where only the
compiler can tell (docs/reliability.md, "Bad input")."""

import re

import jax
import jax.numpy as jnp
import pytest

import cutecall
import cuda.bindings.driver as cuda
import cutlass.cute as cute
from cutecall.examples import kernels


def sds(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def lower(call, *args):
    return jax.jit(call).trace(*args).lower(lowering_platforms=("cuda",))


def vector_add():
    return cutecall.cutlass_call(
        kernels.vector_add, output_shape_dtype=lambda a, b: sds(a.shape, a.dtype))


def test_a_rank0_array_is_named_before_compiling(compiles):
    with pytest.raises(TypeError, match=r"launcher 'vector_add': positional argument 0 "
                                        r"\(parameter 'a'\) is a rank-0 array \(float32\[\]\)"
                                        r".*x.reshape\(1\)"):
        lower(vector_add(), sds(()), sds(()))
    assert compiles() == 0


def test_a_complex_array_names_the_kernel_and_operand(compiles):
    with pytest.raises(TypeError, match=r"kernel 'vector_add', input 'a' has dtype "
                                        r"complex64, which cutecall does not map"):
        lower(vector_add(), sds((8,), jnp.complex64), sds((8,), jnp.complex64))
    assert compiles() == 0


def test_extents_past_int32_compile_with_64_bit_extents(compiles):
    # Not rejected at execute: the kernel takes Int64 extents (one compile).
    text = lower(vector_add(), sds((2**40,)), sds((2**40,))).as_text()
    assert "cutecall" in text and compiles() == 1
    small = lower(vector_add(), sds((4096,)), sds((4096,)))
    assert small is not None and compiles() == 2  # Int32 extents: its own compile


def test_mismatched_dtypes_name_the_odd_argument_and_fail_once(compiles):
    add = vector_add()
    with pytest.raises(cutecall.CompileError) as e:
        lower(add, sds((4096,)), sds((4096,), jnp.bfloat16))
    first, arrays = str(e.value).splitlines()[:2]
    assert re.search(r"kernel 'vector_add' failed to compile for sm_90a at "
                     r"\S*elementwise.py:\d+ \(in \w+\): argument 'b' is bfloat16\[4096\] "
                     r"but 'a', 'c' are float32 \(the call's arrays differ in dtype\); "
                     r"the DSL says: ", first)
    assert arrays == "  arrays: a float32[4096], b bfloat16[4096], c float32[4096] (output)"
    n = compiles()
    with pytest.raises(cutecall.CompileError, match="argument 'b' is bfloat16"):
        lower(add, sds((4096,)), sds((4096,), jnp.bfloat16))
    assert compiles() == n  # the same call fails again without compiling


def test_a_rank_that_earlier_calls_did_not_use_is_named(compiles):
    add = vector_add()
    lower(add, sds((4096,)), sds((4096,)))
    with pytest.raises(cutecall.CompileError,
                       match=r"argument 'a' is float32\[64, 64\]; earlier calls that "
                             r"compiled passed rank 1; the DSL says"):
        lower(add, sds((64, 64)), sds((4096,)))


def test_a_plain_function_is_refused_by_name_before_compiling(compiles):
    def not_jitted(a, b, c):
        pass
    call = cutecall.cutlass_call(not_jitted, output_shape_dtype=lambda a, b: a)
    with pytest.raises(TypeError, match=r"launcher 'not_jitted' .* is not a @cute.jit "
                                        r"function.*Decorate it with @cute.jit"):
        lower(call, sds((8,)), sds((8,)))
    assert compiles() == 0


def test_a_plain_function_wrapping_a_launcher_is_accepted(compiles):
    def wraps_one(stream: cuda.CUstream, a, b, c):
        kernels.vector_add(stream, a, b, c)
    call = cutecall.cutlass_call(wraps_one, output_shape_dtype=lambda a, b: a)
    assert lower(call, sds((8,)), sds((8,))) is not None and compiles() == 1


def test_a_bare_cute_kernel_is_refused(compiles):
    @cute.kernel
    def device_code(a: cute.Tensor, b: cute.Tensor):
        pass
    call = cutecall.cutlass_call(device_code, output_shape_dtype=lambda a: a)
    with pytest.raises(TypeError, match="is a @cute.kernel .*pass the @cute.jit function"):
        lower(call, sds((8,)))
    assert compiles() == 0


def test_the_readme_example_refuses_a_short_b_before_compiling(compiles):
    n = cutecall.TensorSpec(dims=("n",))  # README.md's first example
    add = cutecall.cutlass_call(
        kernels.vector_add, output_shape_dtype=lambda a, b: sds(a.shape, a.dtype),
        input_spec=n, output_spec=n)
    with pytest.raises(ValueError, match=r"operand 'b' dim 0 = 10 must equal operand "
                                         r"'a' dim 0 = 4096 \(tied dim 'n'\)"):
        lower(add, sds((4096,)), sds((10,)))
    assert compiles() == 0


def test_a_kernel_object_with_a_plain_call_launching_its_kernel_is_accepted(compiles):
    class Scale:  # CUTLASS-example style: __call__ is plain, the kernel a method
        @cute.kernel
        def kernel(self, a: cute.Tensor, c: cute.Tensor):
            pass

        def __call__(self, stream: cuda.CUstream, a, c):
            self.kernel(a, c).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)

    call = cutecall.cutlass_call(Scale(), output_shape_dtype=lambda a: a)
    assert lower(call, sds((8,))) is not None and compiles() == 1


def test_arrays_of_another_rank_on_the_first_call_are_named_with_their_rank(compiles):
    # No earlier call to compare with, and the call's arrays agree: the DSL's
    # coordinates (rank 2 against rank 1) say which rank the kernel takes.
    with pytest.raises(cutecall.CompileError) as e:
        lower(vector_add(), sds((8, 16)), sds((8, 16)))
    first = str(e.value).splitlines()[0]
    assert re.match(r"cutecall: kernel 'vector_add' failed to compile for sm_90a at "
                    r"\S*elementwise.py:\d+ \(in _vector_add_kernel\): arguments 'a', "
                    r"'b', 'c' are rank 2 \(float32\[8, 16\]\) but the kernel compares "
                    r"rank-2 coordinates with rank-1 ones: it likely takes rank-1 arrays; "
                    r"the DSL says: ", first)
    assert "congruent" in first


def test_a_later_process_names_the_rank_too(tmp_path):
    """Another process finds the dynamic form's rejection recorded; its error
    is still the call's own (the start form compiled again), not a static
    form's."""
    import subprocess
    import sys
    from shared import child_env
    code = ("import jax, jax.numpy as jnp, cutecall\n"
            "from cutecall.examples import kernels\n"
            "s = jax.ShapeDtypeStruct((8, 16), jnp.float32)\n"
            "call = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)\n"
            "try:\n"
            "    call.lower(s, s)\n"
            "except cutecall.CompileError as e:\n"
            "    print('FIRST=' + str(e).splitlines()[0])\n")
    env = child_env(CUTECALL_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], env=env,
                             capture_output=True, text=True, timeout=300)
        first = [l for l in out.stdout.splitlines() if l.startswith("FIRST=")]
        assert first and "arguments 'a', 'b', 'c' are rank 2" in first[0], \
            out.stdout + out.stderr[-2000:]
