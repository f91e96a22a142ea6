"""A kernel object whose trace fills attributes it already had (QuACK's GEMM
objects set ``b_smem_layout_staged``, ``epi_tile``, ... while they compile)
keeps its kernel: a front that binds the object again after the compile
finds the same kernel instead of compiling a second one
(``fingerprint.remember_compiled_state``). A changed configuration is still
a new kernel."""

import jax
import jax.numpy as jnp

import cutecall
import cuda.bindings.driver as cuda
import cutlass.cute as cute


def sds(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def lower(call, *args):
    return jax.jit(call).trace(*args).lower(lowering_platforms=("cuda",))


class Copy:
    """``c = a``, one block per 128 elements; ``__call__`` records what it
    derived, as QuACK's objects do, in an attribute set to None first."""

    def __init__(self, threads: int = 128):
        self.threads = threads
        self.derived = None

    @cute.kernel
    def kernel(self, a: cute.Tensor, c: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * self.threads + tidx
        if i < a.shape[0]:
            c[i] = a[i]

    def __call__(self, stream: cuda.CUstream, a, c):
        self.derived = ("grid", self.threads)  # derived while tracing
        grid = (cute.ceil_div(a.shape[0], self.threads), 1, 1)
        self.kernel(a, c).launch(grid=grid, block=(self.threads, 1, 1), stream=stream)


def bind(obj):
    return cutecall.cutlass_call(obj, output_shape_dtype=lambda a: a)


def test_binding_the_object_again_after_its_compile_finds_the_same_kernel(compiles):
    obj = Copy()
    assert lower(bind(obj), sds((1000,))) is not None
    assert compiles() == 1 and obj.derived == ("grid", 128)
    # A new front binding after the compile: the trace's values, not new content.
    assert lower(bind(obj), sds((2000,))) is not None
    assert compiles() == 1
    # A changed configuration is a new kernel.
    obj.threads = 256
    assert lower(bind(obj), sds((1000,))) is not None
    assert compiles() == 2
