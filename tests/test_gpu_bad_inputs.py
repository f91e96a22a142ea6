"""Bad inputs on a GPU, where the calls could run: a declared dtype refused
before compiling while the right one launches and computes (both fronts),
a CPU-committed JAX array refused by name while GPU arrays run, a NumPy
array for a torch kernel on a CUDA host. Marked `gpu`; each front skips
without its framework."""

import numpy as np
import pytest

import cutecall
from cutecall.examples import kernels

pytestmark = pytest.mark.gpu

N = 4096
FLOAT32 = {"a": "float32", "b": "float32", "c": "float32"}


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def jax_gpu():
    jax = pytest.importorskip("jax")
    if jax.default_backend() != "gpu":
        pytest.skip("JAX sees no GPU")
    return jax, jax.numpy


def test_torch_a_declared_dtype_is_refused_and_the_right_one_runs(compiles):
    torch = torch_cuda()
    import cutecall.torch
    add = cutecall.torch.kernel(kernels.vector_add, dtypes=FLOAT32)
    a, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    with pytest.raises(TypeError, match=r"argument 'b' of 'vector_add' is int32\[4096\], "
                                        r"but dtypes= declares float32 for 'b'"):
        add(a, b.int(), torch.empty_like(a))
    assert compiles() == 0 and len(add.launch) == 0
    c = torch.empty_like(a)
    add(a, b, c)
    torch.testing.assert_close(c, a + b)
    with pytest.raises(TypeError, match="argument 'b' of 'vector_add' is int32"):
        add(a, b.int(), c)  # still refused once float32 is compiled
    assert compiles() == 1


def test_torch_a_numpy_array_on_a_cuda_host_says_how_to_make_a_tensor(compiles):
    torch_cuda()
    import cutecall.torch
    add = cutecall.torch.kernel(kernels.vector_add)
    x = np.zeros(N, np.float32)
    with pytest.raises(TypeError, match=r"argument 'a' of 'vector_add' is a NumPy array "
                                        r"float32\[4096\].*torch.from_numpy\(x\).cuda\(\)"):
        add(x, x, x)
    assert compiles() == 0


def test_jax_a_declared_dtype_is_refused_and_the_right_one_runs(compiles):
    jax, jnp = jax_gpu()
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a,
                                dtypes=FLOAT32)
    a = jnp.arange(N, dtype=jnp.float32)
    with pytest.raises(TypeError, match=r"argument 'b' of 'vector_add' is int32\[4096\]"):
        add(a, a.astype(jnp.int32))
    assert compiles() == 0
    np.testing.assert_array_equal(np.asarray(add(a, a)), np.asarray(a + a))
    assert compiles() == 1


def test_jax_a_cpu_array_is_refused_by_name_where_gpu_arrays_run(compiles):
    jax, jnp = jax_gpu()
    add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)
    on_cpu = jax.device_put(jnp.ones(N), jax.devices("cpu")[0])
    with pytest.raises(NotImplementedError, match=r"kernel 'vector_add' runs only on CUDA "
                                                  r"GPUs, but argument 'a' is on"):
        add(on_cpu, on_cpu)
    assert compiles() == 0
    x = jnp.ones(N)
    np.testing.assert_array_equal(np.asarray(add(x, x)), np.full(N, 2.0, np.float32))
