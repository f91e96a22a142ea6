"""A kernel module written the way users of NVIDIA's ``cutlass.jax`` write
them (their import style and call style). The one line that differs from
the original is the import of ``cutlass_call`` / ``TensorSpec``::

    from cutlass.jax import cutlass_call, TensorSpec      # the original
    from cutecall import cutlass_call, TensorSpec         # the drop-in

``run_all(a, b)`` returns every result with its JAX reference; the GPU test
checks that they are equal.
"""

import cuda.bindings.driver as cuda
import jax

import cutlass
import cutlass.cute as cute
from cutecall import TensorSpec, cutlass_call


@cute.kernel
def add_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, const_a: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    c[bidx, tidx] = a[bidx, tidx] + b[bidx, tidx] * const_a


@cute.jit
def launch(stream: cuda.CUstream, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor,
           *, const_a: float):
    add_kernel(a, b, c, const_a).launch(
        grid=[a.shape[0], 1, 1], block=[a.shape[1], 1, 1], stream=stream)


@cute.jit
def launch_reordered(out: cute.Tensor, constval: cutlass.Constexpr, a: cute.Tensor,
                     b: cute.Tensor, stream: cuda.CUstream):
    add_kernel(a, b, out, constval).launch(
        grid=[a.shape[0], 1, 1], block=[a.shape[1], 1, 1], stream=stream)


@cute.kernel
def transpose_kernel(x: cute.Tensor, y: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    y[bidx, tidx] = x[bidx, tidx]


@cute.jit
def launch_transpose(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor):
    transpose_kernel(x, y).launch(grid=[y.shape[0], 1, 1], block=[y.shape[1], 1, 1],
                                  stream=stream)


@jax.jit
def run_all(a, b):
    out = jax.ShapeDtypeStruct(a.shape, a.dtype)
    results = {}
    # Keyword constexpr, the seed's basic form.
    results["basic"] = (cutlass_call(launch, output_shape_dtype=out, const_a=2.0)(a, b),
                        a + 2.0 * b)
    # The seed's lambda re-binding an unusual signature.
    results["lambda"] = (
        cutlass_call(lambda stream, a, b, out, **kw: launch_reordered(out, kw["constval"], a, b, stream),
                     output_shape_dtype=out, constval=3.0)(a, b),
        a + 3.0 * b)
    # The seed's mode example: the kernel sees a transposed view, no copy.
    results["mode"] = (
        cutlass_call(launch_transpose, output_shape_dtype=jax.ShapeDtypeStruct(a.shape[::-1], a.dtype),
                     input_spec=TensorSpec(mode=(1, 0)))(a),
        a.T)
    # Aliased output (donated in the seed; here inside jit, XLA copies).
    results["alias"] = (
        cutlass_call(launch, output_shape_dtype=(out, out), input_output_aliases={0: 0},
                     const_a=1.0)(a, b)[1],
        a + b)
    return results
