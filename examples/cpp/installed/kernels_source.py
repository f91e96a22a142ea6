"""The bundle the C++ consumer test exports (CPU is enough: compiles for
sm_90a): `cutecall export OUT cpp/tests/consumer/kernels_source.py --header
kernels.h`. vector_add serves every length, its three operands tied by
dims=("n",); affine has runtime scalars of four types."""

import jax
import jax.numpy as jnp

import cutecall
from cutecall.examples import kernels, signatures


def bundle_kernels():
    n, = jax.export.symbolic_shape("n")
    s = jax.ShapeDtypeStruct((n,), jnp.float32)
    one = cutecall.TensorSpec(dims=("n",))
    add = cutecall.compile(kernels.vector_add, s, s, output_shape_dtype=lambda a, b: a,
                           input_spec=one, output_spec=one)
    f = jax.ShapeDtypeStruct((64,), jnp.float32)
    affine = cutecall.compile(signatures.affine, f, 1.0, 2, 3, True,
                              output_shape_dtype=lambda x, *scalars: x)
    return {"vector_add": add, "affine": affine}
