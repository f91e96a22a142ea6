"""cuDNN frontend's Blackwell CuTe DSL kernels (``nvidia-cudnn-frontend``
1.32), called the way cuDNN calls them.

=================  =========================================================
``gemm_swiglu``    ``PersistentDenseGemmKernel`` of
                   ``cudnn.gemm.cutedsl.dense.swiglu``: ab12 = A B (fp32),
                   c = SwiGLU(ab12) (fp16); bf16 A (M, K, 1), B (N, K, 1),
                   tile 128x128, persistent (``max_active_clusters`` from
                   ``HardwareInfo`` when the object is made)
``rmsnorm_rht``    ``RMSNormRHTAmaxKernel`` of ``cudnn.rmsnorm_rht_amax``:
                   o = Hadamard(RMSNorm(x) w) (bf16), amax per CTA (fp32);
                   x (M, N) bf16, no MMA
=================  =========================================================

JAX. The GEMM runs through cuDNN's own JAX API,
``gemm_swiglu_jax_sm100(a, b)``, which calls NVIDIA's bridge
(``cudnn.jax.call`` -> ``cutlass.jax.cutlass_call`` with
``cutlass.jax.TensorSpec(layout=(1, 0, 2))`` operand specs); here
``cutecall.cutlass_call`` and ``cutecall.TensorSpec`` stand in for them
(:func:`cutecall_bridge`: the one-import change a user makes). cuDNN has
no JAX API for the norm: its kernel object goes to ``cutecall.cutlass_call``
as cuDNN's torch path calls it, ``call(x, w, eps) -> (o, amax)``.

torch. cuDNN's wrappers (``gemm_swiglu_wrapper_sm100(a, b)``,
``rmsnorm_rht_amax_wrapper_sm100(x, w)``) run on meta tensors up to
``cute.compile`` (``authors.compile_args``); the kernel object and the
constants they compile in (``max_active_clusters``) go to
``cutecall.torch.kernel``, called as cuDNN's ``execute`` calls the compiled
kernel: ``k(a, b, ab12, c, alpha)``, ``k(x, w, o, amax, eps)``.

cuDNN checks support against the GPU it sees (the CUDA runtime, or torch
when imported): those answers come from the target
(cutecall's ``building()``), the B200. Sizes: GEMM (M, N, K) = (1024,
512, 256); norm (M, N) = (1024, 4096).
"""

from __future__ import annotations

import contextlib
import functools
import sys

from . import authors
from .sm100 import Sm100Case, building, meta, sds

KERNELS = ("gemm_swiglu", "rmsnorm_rht")
M, N, K = 1024, 512, 256
NORM_M, NORM_N, EPS = 1024, 4096, 1e-5


def cases() -> list[Sm100Case]:
    return [case(k) for k in KERNELS]


@contextlib.contextmanager
def cutecall_bridge():
    """cuDNN's JAX layer with cutecall's ``cutlass_call`` and
    ``TensorSpec`` in place of NVIDIA's ``cutlass.jax`` ones, restored
    afterwards."""
    import cudnn.jax.call  # noqa: F401 (the module; cudnn.jax.call is its function)

    import cutecall
    bridge = sys.modules["cudnn.jax.call"]
    saved = bridge.cutlass_call, bridge.TensorSpec
    bridge.cutlass_call, bridge.TensorSpec = cutecall.cutlass_call, cutecall.TensorSpec
    try:
        yield
    finally:
        bridge.cutlass_call, bridge.TensorSpec = saved


@contextlib.contextmanager
def _for_sm100():
    import torch  # noqa: F401 (building() answers torch's queries once it is imported)
    with building():
        yield


def gemm_swiglu_jax(a, b):
    """cuDNN's ``gemm_swiglu_jax_sm100(a, b) -> (ab12, c)`` through
    cutecall's bridge, built for the target."""
    from cudnn.gemm.cutedsl.dense.swiglu.jax_api import gemm_swiglu_jax_sm100
    with cutecall_bridge(), _for_sm100():
        return gemm_swiglu_jax_sm100(a, b)


@functools.lru_cache(maxsize=None)
def captured(kernel: str) -> authors.Captured:
    """What cuDNN's torch wrapper for `kernel` hands ``cute.compile``."""
    with _for_sm100():
        if kernel == "gemm_swiglu":
            from cudnn.gemm.cutedsl.dense.swiglu.api import gemm_swiglu_wrapper_sm100
            return authors.compile_args(gemm_swiglu_wrapper_sm100, meta((M, K, 1)),
                                        meta((N, K, 1)))
        from cudnn.rmsnorm_rht_amax import rmsnorm_rht_amax_wrapper_sm100
        return authors.compile_args(rmsnorm_rht_amax_wrapper_sm100, meta((NORM_M, NORM_N)),
                                    meta((NORM_N,)), eps=EPS)


def _amax_shape() -> tuple:
    """One amax a CTA: M / rows_per_cta (cuDNN's ``pick_rows_per_cta``)."""
    return (NORM_M // captured("rmsnorm_rht").kernel.rows_per_cta,)


def _jax(kernel: str):
    import jax.numpy as jnp
    bf16 = jnp.bfloat16
    if kernel == "gemm_swiglu":
        return gemm_swiglu_jax, (sds((M, K, 1), bf16), sds((N, K, 1), bf16))
    import cutecall
    call = cutecall.cutlass_call(captured(kernel).kernel, output_shape_dtype=(
        sds((NORM_M, NORM_N), bf16), sds(_amax_shape(), jnp.float32)))
    return call, (sds((NORM_M, NORM_N), bf16), sds((NORM_N,), bf16), EPS)


def _torch(kernel: str):
    import torch

    import cutecall.torch
    cap = captured(kernel)
    if kernel == "gemm_swiglu":
        k = cutecall.torch.kernel(cap.kernel, outputs=("ab12", "c"),
                                  max_active_clusters=cap.kwargs["max_active_clusters"])
        ab12 = torch.empty_strided((M, N, 1), (N, 1, M * N), dtype=torch.float32,
                                   device="meta")
        c = torch.empty_strided((M, N // 2, 1), (N // 2, 1, M * N // 2),
                                dtype=torch.float16, device="meta")
        return k, (meta((M, K, 1)), meta((N, K, 1)), ab12, c, cap.kwargs["alpha"])
    k = cutecall.torch.kernel(cap.kernel, outputs=("o_tensor", "amax_tensor"))
    return k, (meta((NORM_M, NORM_N)), meta((NORM_N,)), meta((NORM_M, NORM_N)),
               meta(_amax_shape(), torch.float32), EPS)


_HOW = {"gemm_swiglu": "JAX: gemm_swiglu_jax_sm100(a, b); torch: "
                       "gemm_swiglu_wrapper_sm100(a, b)",
        "rmsnorm_rht": "torch: rmsnorm_rht_amax_wrapper_sm100(x, w); JAX: "
                       "its kernel object through cutlass_call"}


def case(kernel: str) -> Sm100Case:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    shape = f"{M}x{N}x{K}" if kernel == "gemm_swiglu" else f"{NORM_M}x{NORM_N}"
    return Sm100Case(name=f"cudnn.{kernel}[bf16 {shape}]", jax=lambda: _jax(kernel),
                     torch=lambda: _torch(kernel), mma=kernel == "gemm_swiglu",
                     how=_HOW[kernel])
