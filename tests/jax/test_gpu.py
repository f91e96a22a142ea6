"""GPU tests: every example kernel against its numpy reference, eagerly and
under jit, with command buffers on and off; two kernels in one program; one
kernel at five shapes with one compile; run-time errors before launch.
Marked `gpu`: skipped cleanly where JAX sees no CUDA device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cutecall
from cutecall import TensorSpec
from cutecall.examples import kernels
from cutecall.examples.kernels import REFERENCES

pytestmark = pytest.mark.gpu


def rand(key, shape, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(key), shape, jnp.float32).astype(dtype)


def like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def close(got, want, tol=1e-5):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape
    denom = max(np.linalg.norm(want), 1e-30)
    assert np.linalg.norm(got - want) / denom <= tol, \
        np.linalg.norm(got - want) / denom


CASES = {
    "vector_add": (lambda: (rand(0, (100_003,)), rand(1, (100_003,))),
                   lambda a, b: like(a), {}, 1e-6),
    "scale_bias_act": (lambda: (rand(2, (300, 257)), rand(3, (257,))),
                       lambda x, bias: like(x), dict(alpha=1.5, relu=True), 1e-6),
    "transpose": (lambda: (rand(4, (301, 129)),),
                  lambda x: jax.ShapeDtypeStruct(x.shape[::-1], x.dtype), {}, 0),
    "row_sum": (lambda: (rand(5, (129, 1000)),),
                lambda x: jax.ShapeDtypeStruct(x.shape[:1], x.dtype), {}, 1e-5),
    "gemm": (lambda: (rand(6, (256, 128), jnp.float16), rand(7, (128, 384), jnp.float16)),
             lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
             {}, 1e-3),
    "copy": (lambda: (rand(8, (1 << 20) + 5),), lambda x: like(x), {}, 0),
}


def reference(name, args, constexprs):
    return REFERENCES[name](*[np.asarray(a, np.float32) for a in args], **constexprs)


@pytest.mark.parametrize("graph", [True, False], ids=["graph", "nograph"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_reference(name, graph):
    make_args, outs, constexprs, tol = CASES[name]
    args = make_args()
    call = cutecall.cutlass_call(getattr(kernels, name), output_shape_dtype=outs,
                                 allow_cuda_graph=graph, **constexprs)
    want = reference(name, args, constexprs)
    close(call(*args), want, tol)                       # eager
    close(jax.jit(lambda *a: call(*a))(*args), want, tol)  # under jit
    # Many calls in one program: XLA captures them in a command buffer when
    # graph=True (the default target is command-buffer compatible).
    many = jax.jit(lambda *a: [call(*a) for _ in range(8)])(*args)
    for got in many:
        close(got, want, tol)


def test_two_kernels_in_one_program():
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: like(a))
    tr = cutecall.cutlass_call(
        kernels.transpose, output_shape_dtype=lambda x: jax.ShapeDtypeStruct(x.shape[::-1], x.dtype))
    a, b = rand(10, (64, 48)), rand(11, (64, 48))

    @jax.jit
    def program(a, b):
        s = add(a.reshape(-1), b.reshape(-1)).reshape(a.shape)
        return tr(s) * 2.0 + 1.0

    close(program(a, b), (np.asarray(a) + np.asarray(b)).T * 2.0 + 1.0, 1e-6)


def test_one_compile_per_divisibility_class(compiles):
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: like(a),
                                name="vadd_shapes", compile_options="--opt-level 3")
    for n in (1, 31, 65_537, 3_000_001):   # odd: class 1
        a, b = rand(n % 7, (n,)), rand(n % 5 + 7, (n,))
        close(add(a, b), np.asarray(a) + np.asarray(b), 1e-6)
    assert compiles() == 1
    for n in (4096, 100, 1 << 20):        # multiples of 4 f32: class 4
        a, b = rand(n % 7, (n,)), rand(n % 5 + 7, (n,))
        close(add(a, b), np.asarray(a) + np.asarray(b), 1e-6)
    assert compiles() == 2


def test_in_place_alias():
    # Inputs (a, b, c_in); output 0 aliases c_in, so the launcher receives
    # (stream, a, b, c_in) and writes a + b through c_in.
    inplace = cutecall.cutlass_call(kernels.vector_add,
                                    output_shape_dtype=lambda a, b, c: like(c),
                                    input_output_aliases={2: 0})
    a, b = rand(0, (1000,)), rand(1, (1000,))
    c = jnp.zeros((1000,), jnp.float32)
    out = jax.jit(inplace, donate_argnums=2)(a, b, c)
    close(out, np.asarray(a) + np.asarray(b), 1e-6)


def test_divisibility_violation_is_an_error_before_launch():
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: like(a),
                                input_spec=TensorSpec(divisibility=8))
    close(add(rand(0, (64,)), rand(1, (64,))), np.asarray(rand(0, (64,))) +
          np.asarray(rand(1, (64,))), 1e-6)
    with pytest.raises(Exception, match=r"kernel 'vector_add'.*'a'.*dim 0 = 63 is not divisible by 8"):
        jax.block_until_ready(add(rand(0, (63,)), rand(1, (63,))))


def test_modules_are_loaded_once_per_process():
    from cutecall import _core
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: like(a))
    a = rand(0, (128,))
    jax.block_until_ready(add(a, a))
    before = _core.registry_stats()["total_loads"]
    for n in (256, 512):
        jax.block_until_ready(jax.jit(lambda x: add(x, x) + 1)(rand(1, (n,))))
    assert _core.registry_stats()["total_loads"] == before
