"""QuACK's Blackwell GEMM (``GemmDefaultSm100``), built by QuACK's own
compile path for device capacity (10, 0) and called the way QuACK calls it.

QuACK's public torch entry runs on meta tensors with ``QUACK_ARCH=sm_100``
(QuACK's cross-compile setting) and its ``@jit_cache``'d
``quack.gemm._compile_gemm`` undecorated, stopped at ``cute.compile``
(``authors.compile_args``): the kernel object and argument containers
(``EpilogueArguments``, ``TileSchedulerOptions``) are QuACK's own.

=================  =========================================================
``gemm_256x256``   ``gemm(a, b, out=d, tuned=False)``: QuACK's sm100 default
                   (``_default_config_for_cap(10)``): tile 256x256, cluster
                   2x1 (2-CTA MMA), CLC dynamic persistent scheduler
``gemm_128x256``   ``gemm_tuned.fn(a, b, d, config=GemmConfig(128, 256,
                   cluster 1x1))``: 1-CTA
=================  =========================================================

The launcher: ``Gemm(mA, mB, mD, mC, epilogue_args, scheduler_args,
varlen_args, stream, mSFA=None, mSFB=None)``; D = A B, bf16 A (M, K) and B
(K, N) as QuACK passes them (B in its (K, N) orientation, ``b_kn``), no C::

    call = cutecall.cutlass_call(gemm, output_params=("mD",), output_shape_dtype=...)
    d = call(a, b, None, epi, sched, None)              # JAX
    cutecall.torch.kernel(gemm, outputs=("mD",))(a, b, d, None, epi, sched, None)

``sched`` is QuACK's ``make_scheduler_args(max_active_clusters, 8)``, the
cluster count the target's (B200: 148 SMs) as QuACK's
``get_max_active_clusters`` would answer on one. (M, N, K) = (1000, 512,
256).
"""

from __future__ import annotations

import contextlib
import functools
import os

from . import authors
from .sm100 import Sm100Case, building, meta, sds, target

KERNELS = ("gemm_256x256", "gemm_128x256")
M, N, K = 1000, 512, 256


def cases() -> list[Sm100Case]:
    return [case(k) for k in KERNELS]


@contextlib.contextmanager
def _quack_for_sm100():
    """QuACK's host code as on a B200: ``QUACK_ARCH`` sm_100 (the
    capacity QuACK dispatches on) and ``CUTE_DSL_ARCH`` sm_100a (the one it
    emits code for; on a GPU host QuACK would take the GPU's), objects
    built for the target, ``_compile_gemm`` undecorated (a kernel QuACK
    compiled already is captured too). QuACK caches both capacities per
    process: emptied before and after, so neither leaks into other QuACK
    calls."""
    from quack import cute_dsl_utils
    from quack import gemm as qgemm
    caches = (cute_dsl_utils._get_device_capacity_cached,
              cute_dsl_utils.get_compile_target_capacity)
    env = {"QUACK_ARCH": "sm_100", "CUTE_DSL_ARCH": "sm_100a"}
    saved_env = {name: os.environ.get(name) for name in env}
    cached = qgemm._compile_gemm
    os.environ.update(env)
    qgemm._compile_gemm = cached.__wrapped__
    for cache in caches:
        cache.cache_clear()
    try:
        with building():
            yield
    finally:
        qgemm._compile_gemm = cached
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for cache in caches:
            cache.cache_clear()


@functools.lru_cache(maxsize=None)
def captured(kernel: str) -> authors.Captured:
    """What QuACK's path for `kernel` hands ``cute.compile`` on sm100."""
    from quack import gemm_interface as gi
    from quack.gemm_config import GemmConfig
    a, b, d = meta((M, K)), meta((K, N)), meta((M, N))
    with _quack_for_sm100():
        if kernel == "gemm_256x256":
            return authors.compile_args(gi.gemm, a, b, out=d, tuned=False)
        config = GemmConfig(tile_m=128, tile_n=256, cluster_m=1, cluster_n=1, pingpong=False,
                            is_dynamic_persistent=True, device_capacity=10)
        return authors.compile_args(gi.gemm_tuned.fn, a, b, d, config=config)


def scheduler(kernel: str):
    """QuACK's launch-time ``TileSchedulerOptions`` for the target."""
    from quack.gemm_tvm_ffi_utils import make_scheduler_args
    cap = captured(kernel)
    size = cap.kernel.cluster_shape_mnk[0] * cap.kernel.cluster_shape_mnk[1]
    clusters = target().device.max_active_clusters(size)
    return make_scheduler_args(clusters, 8, None)._replace(raster_order=cap.args[5].raster_order)


def _jax(kernel: str):
    import cutecall
    import jax.numpy as jnp
    cap = captured(kernel)

    def out(a, b, c, epi, sched, var):
        return sds((a.shape[0], b.shape[1]), a.dtype)
    call = cutecall.cutlass_call(cap.kernel, output_shape_dtype=out, output_params=("mD",))
    bf16 = jnp.bfloat16
    return call, (sds((M, K), bf16), sds((K, N), bf16), None, cap.args[4], scheduler(kernel),
                  None)


def _torch(kernel: str):
    import cutecall.torch
    cap = captured(kernel)
    return cutecall.torch.kernel(cap.kernel, outputs=("mD",)), (
        meta((M, K)), meta((K, N)), meta((M, N)), None, cap.args[4], scheduler(kernel), None)


def case(kernel: str) -> Sm100Case:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    how = ("gemm_interface.gemm(a, b, out=d, tuned=False)" if kernel == "gemm_256x256"
           else "gemm_interface.gemm_tuned.fn(a, b, d, config=GemmConfig(128, 256, 1x1))")
    return Sm100Case(name=f"quack.{kernel}[bf16 {M}x{N}x{K}]", jax=lambda: _jax(kernel),
                     torch=lambda: _torch(kernel), how=how)
