"""CuTe DSL kernels written the way ejkernel's ``ejkernel/kernels/_cute``
modules are, running on cutecall: the drop-in example.

The only line changed from an ejkernel kernel module is the import::

    # from ejkernel.callib._cute_call import cute_call
    # from ejkernel.callib._cute_ffi import build_cute_ffi_call, has_cute_ffi_support
    from cutecall.ejkernel import (build_cute_ffi_call, cute_call,
                                   has_cute_ffi_support)

Everything else follows ejkernel's style: ``@cute.jit`` host launchers are
built by a ``_build_*_host_fns`` function (closures over the parameters,
rebuilt on every Python call), wrapped with ``build_cute_ffi_call(...,
compile_options="--enable-tvm-ffi")`` and run with ``cute_call(...,
call=..., out_shape=..., name=...)``. ejkernel modules also run
``os.environ.setdefault("CUTE_DSL_ENABLE_TVM_FFI", "1")`` at import; that
line may stay (cutecall.ejkernel turns the DSL's TVM-FFI mode off while it
compiles) but is left out here: library modules do not change the
environment at import.

Kernels (each with a JAX reference, ``REFERENCES``):

``scale_add(x, y, scale=)``      ``x * scale + y`` (1-D). Its call name does
                                 not encode ``scale``: under ejkernel the
                                 second scale would reuse the first kernel.
``update_rows(cache, rows, idx)`` ``cache[idx[r]] = rows[r]`` in place
                                 (``input_output_aliases``), like ejkernel's
                                 paged KV-cache update.
``scale_add_streamless(...)``    ``scale_add`` with a launcher that takes no
                                 stream (ejkernel's ``*_host_runtime`` form).
``add_sub(x, y)``                ``(x + y, x - y)``: two outputs.
"""

from __future__ import annotations

from collections.abc import Callable

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import jax
import jax.numpy as jnp

from cutecall.ejkernel import (build_cute_ffi_call, cute_call,
                                       has_cute_ffi_support)

_THREADS = 128


def _build_scale_add_host_fns(scale: float) -> tuple[Callable[..., None], Callable[..., None]]:
    """Builds ``(runtime_launcher, jax_stream_launcher)`` for ``x * scale + y``.

    One thread per element, ``_THREADS`` per block, bounds-checked; the math
    is done in float32 and stored in the output dtype.
    """

    @cute.kernel
    def _scale_add_kernel(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * _THREADS + tidx
        if i < out.shape[0]:
            v = x[i].to(cutlass.Float32) * cutlass.Float32(scale) + y[i].to(cutlass.Float32)
            out[i] = v.to(out.element_type)

    @cute.jit
    def _scale_add_host_runtime(x: cute.Tensor, y: cute.Tensor, out: cute.Tensor):
        n = out.shape[0]
        if n > 0:
            _scale_add_kernel(x, y, out).launch(
                grid=(cute.ceil_div(n, _THREADS), 1, 1), block=(_THREADS, 1, 1)
            )

    @cute.jit
    def _scale_add_host_jax(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor, out: cute.Tensor):
        n = out.shape[0]
        if n > 0:
            _scale_add_kernel(x, y, out).launch(
                grid=(cute.ceil_div(n, _THREADS), 1, 1), block=(_THREADS, 1, 1), stream=stream
            )

    return _scale_add_host_runtime, _scale_add_host_jax


def _build_add_sub_host_fns() -> Callable[..., None]:
    """Builds the launcher of ``(x + y, x - y)`` for 1-D arrays."""

    @cute.kernel
    def _add_sub_kernel(x: cute.Tensor, y: cute.Tensor, s: cute.Tensor, d: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * _THREADS + tidx
        if i < s.shape[0]:
            s[i] = x[i] + y[i]
            d[i] = x[i] - y[i]

    @cute.jit
    def _add_sub_host_jax(
        stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor, s: cute.Tensor, d: cute.Tensor
    ):
        n = s.shape[0]
        if n > 0:
            _add_sub_kernel(x, y, s, d).launch(
                grid=(cute.ceil_div(n, _THREADS), 1, 1), block=(_THREADS, 1, 1), stream=stream
            )

    return _add_sub_host_jax


def _build_update_rows_host_fns() -> Callable[..., None]:
    """Builds the launcher of ``cache_out[idx[r], :] = rows[r, :]``.

    One block per row of ``rows``; threads stride over the columns. Takes
    the cache twice, as input and as output, as ejkernel's aliased launchers
    do: both are the same buffer.
    """

    @cute.kernel
    def _update_rows_kernel(rows: cute.Tensor, idx: cute.Tensor, cache_out: cute.Tensor):
        r, _, _ = cute.arch.block_idx()
        tidx, _, _ = cute.arch.thread_idx()
        dst = cutlass.Int32(idx[r])
        for j in cutlass.range(tidx, rows.shape[1], _THREADS):
            cache_out[dst, j] = rows[r, j]

    @cute.jit
    def _update_rows_host_jax(
        stream: cuda.CUstream,
        rows: cute.Tensor,
        idx: cute.Tensor,
        _cache_in: cute.Tensor,
        cache_out: cute.Tensor,
    ):
        if rows.shape[0] > 0:
            _update_rows_kernel(rows, idx, cache_out).launch(
                grid=(rows.shape[0], 1, 1), block=(_THREADS, 1, 1), stream=stream
            )

    return _update_rows_host_jax


def _require_support(kernel: str) -> None:
    if not has_cute_ffi_support():
        raise RuntimeError(f"CUTE {kernel} requires CuTe primitive support.")


def scale_add(x: jax.Array, y: jax.Array, *, scale: float) -> jax.Array:
    """``x * scale + y`` for 1-D arrays of one float dtype."""
    _require_support("scale_add")
    _, host_jax = _build_scale_add_host_fns(scale)
    out_struct = jax.ShapeDtypeStruct(x.shape, x.dtype)
    primitive_call = build_cute_ffi_call(
        host_jax,
        output_shape_dtype=out_struct,
        compile_options="--enable-tvm-ffi",
    )
    return cute_call(x, y, call=primitive_call, out_shape=out_struct, name="ejk_scale_add")


def scale_add_streamless(x: jax.Array, y: jax.Array, *, scale: float) -> jax.Array:
    """:func:`scale_add` through the launcher that takes no stream."""
    _require_support("scale_add")
    host_runtime, _ = _build_scale_add_host_fns(scale)
    out_struct = jax.ShapeDtypeStruct(x.shape, x.dtype)
    primitive_call = build_cute_ffi_call(
        host_runtime,
        output_shape_dtype=out_struct,
        compile_options="--enable-tvm-ffi",
    )
    return cute_call(x, y, call=primitive_call, out_shape=out_struct, name="ejk_scale_add_rt")


def add_sub(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(x + y, x - y)`` for 1-D arrays of one dtype."""
    _require_support("add_sub")
    host_jax = _build_add_sub_host_fns()
    out_shape = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype))
    primitive_call = build_cute_ffi_call(
        host_jax,
        output_shape_dtype=out_shape,
        compile_options="--enable-tvm-ffi",
    )
    return cute_call(x, y, call=primitive_call, out_shape=out_shape, name="ejk_add_sub")


def update_rows(cache: jax.Array, rows: jax.Array, idx: jax.Array) -> jax.Array:
    """``cache`` with row ``idx[r]`` replaced by ``rows[r]``, written in place
    (aliased; donate ``cache`` under ``jax.jit`` to avoid XLA's copy).
    ``idx`` is int32 with distinct entries in ``[0, cache.shape[0])``."""
    _require_support("update_rows")
    host_jax = _build_update_rows_host_fns()
    out_shape = jax.ShapeDtypeStruct(cache.shape, cache.dtype)
    primitive_call = build_cute_ffi_call(
        host_jax,
        output_shape_dtype=out_shape,
        input_output_aliases={2: 0},
        compile_options="--enable-tvm-ffi",
    )
    return cute_call(rows, idx, cache, call=primitive_call, out_shape=out_shape, name="ejk_update_rows")


#: Kernel name -> JAX reference taking the same arguments.
REFERENCES = {
    "scale_add": lambda x, y, *, scale: (
        x.astype(jnp.float32) * jnp.float32(scale) + y.astype(jnp.float32)
    ).astype(x.dtype),
    "scale_add_streamless": lambda x, y, *, scale: REFERENCES["scale_add"](x, y, scale=scale),
    "add_sub": lambda x, y: (x + y, x - y),
    "update_rows": lambda cache, rows, idx: cache.at[idx].set(rows),
}
