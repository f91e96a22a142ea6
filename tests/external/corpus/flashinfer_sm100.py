"""FlashInfer's Blackwell CuTe DSL norm + FP4 quantize kernels
(``flashinfer-python`` 0.7, ``flashinfer/cute_dsl``), built and called the
way FlashInfer builds and calls them.

======================  ====================================================
``rmsnorm_fp4quant``    ``RMSNormFP4QuantKernel``: y = RMSNorm(x) w,
                        quantized to NVFP4 (block 16, E4M3 scales): packed
                        FP4 ``mY`` (M, H/2) and scales ``mS`` (M, H/16)
``add_rmsnorm_fp4quant`` ``AddRMSNormFP4QuantKernel``: r += x in place, then
                        the same on r
======================  ====================================================

FlashInfer's public functions (``rmsnorm_fp4quant(x, w)``,
``add_rmsnorm_fp4quant(x, r, w)``) get a compiled kernel from their
``_get_compiled_kernel(...)`` (``functools.cache``); it builds the kernel
object and ``cute.compile``\\ s it on fake tensors. Here that function runs
undecorated up to ``cute.compile`` (``authors.compile_args``) with the
arguments the public function passes on a B200 (sm_version 100, PDL on,
E4M3 scales, row-major scales), and the object goes to cutecall, called as
FlashInfer's ``tensor_api`` calls the compiled kernel::

    rmsnorm:     k(x, w, y, s, global_scale, M, eps)
    add_rmsnorm: k(x, r, w, y, s, s_unswizzled, w, global_scale, M, eps)

(``s_unswizzled`` is allocated and never written; the weight doubles as the
unused normed-output argument, as FlashInfer passes it.)

Both kernels write their FP4 output only through inline PTX ``st.global``
at addresses from ``get_ptr_as_int64(mY, ...)``: no CuTe store names mY, so
the calls name their outputs (``output_params=`` / ``outputs=``) rather than
leave the binding to cutecall's rule.

The objects size themselves from the GPU when built: the cluster size
(``_compute_cluster_n``) is the smallest that fits the device's opt-in
shared memory per block, which FlashInfer reads from
``torch.cuda.get_device_properties``; inside ``building()`` torch answers
with the target's device. H = 4096 (cluster 1 on a B200),
M = 1000.
"""

from __future__ import annotations

import contextlib
import functools

from . import authors
from .sm100 import Sm100Case, building, meta, sds

KERNELS = ("rmsnorm_fp4quant", "add_rmsnorm_fp4quant")
M, H, BLOCK, EPS = 1000, 4096, 16, 1e-6
SM_VERSION, ENABLE_PDL, SCALE_FORMAT = 100, True, "e4m3"  # a B200's


def cases() -> list[Sm100Case]:
    return [case(k) for k in KERNELS]


@contextlib.contextmanager
def for_target(device=None):
    """FlashInfer's host code as on the target (`device`: a
    ``cutecall.DEVICES`` row or ``DeviceProps``, default the B200)."""
    import torch  # noqa: F401 (building() answers torch's queries once it is imported)
    with building(device):
        yield


def captured(kernel: str, hidden: int = H, device=None) -> authors.Captured:
    """What FlashInfer's ``_get_compiled_kernel`` for `kernel` hands
    ``cute.compile`` (a new kernel object each call)."""
    import importlib

    import cutlass
    # the package exports functions of the modules' names: import the modules
    module = importlib.import_module(f"flashinfer.cute_dsl.{kernel}")
    if kernel == "rmsnorm_fp4quant":
        args = (hidden, BLOCK, False, SM_VERSION, SCALE_FORMAT, False, ENABLE_PDL)
    else:
        with for_target(device):
            launch = module.AddRMSNormFP4QuantKernel._compute_launch_config(
                hidden, M, cutlass.BFloat16, SM_VERSION)
        args = (hidden, BLOCK, False, SM_VERSION, SCALE_FORMAT, False, launch, False,
                ENABLE_PDL, False)
    with for_target(device):
        return authors.compile_args(module._get_compiled_kernel.__wrapped__, *args)


@functools.lru_cache(maxsize=None)
def _captured(kernel: str) -> authors.Captured:
    return captured(kernel)


def jax_call(obj, kernel: str):
    """The ``cutlass_call`` of `obj`: ``call(x, w, global_scale, M, eps) ->
    (y, s)``, or for the add ``call(x, r, w, s_unswizzled, w,
    global_scale, M, eps) -> (r, y, s)`` (r in/out)."""
    import cutecall
    import jax.numpy as jnp
    y, s = sds((M, H // 2), jnp.uint8), sds((M, H // BLOCK), jnp.uint8)
    if kernel == "rmsnorm_fp4quant":
        return cutecall.cutlass_call(obj, output_shape_dtype=(y, s), output_params=("mY", "mS"),
                                     enable_pdl=ENABLE_PDL)
    return cutecall.cutlass_call(obj, output_shape_dtype=(sds((M, H), jnp.bfloat16), y, s),
                                 output_params=("mY", "mS"), input_output_aliases={1: 0},
                                 enable_pdl=ENABLE_PDL)


def _jax(kernel: str):
    import jax.numpy as jnp
    bf16, f32 = jnp.bfloat16, jnp.float32
    x, w, scale = sds((M, H), bf16), sds((H,), bf16), sds((1,), f32)
    call = jax_call(_captured(kernel).kernel, kernel)
    if kernel == "rmsnorm_fp4quant":
        return call, (x, w, scale, M, EPS)
    return call, (x, x, w, sds((M, H // BLOCK), jnp.uint8), w, scale, M, EPS)


def _torch(kernel: str):
    import torch

    import cutecall.torch
    u8 = torch.uint8
    obj = _captured(kernel).kernel
    x, w, y, s = meta((M, H)), meta((H,)), meta((M, H // 2), u8), meta((M, H // BLOCK), u8)
    scale = meta((1,), torch.float32)
    if kernel == "rmsnorm_fp4quant":
        k = cutecall.torch.kernel(obj, outputs=("mY", "mS"), enable_pdl=ENABLE_PDL)
        return k, (x, w, y, s, scale, M, EPS)
    k = cutecall.torch.kernel(obj, outputs=("mR", "mY", "mS"), enable_pdl=ENABLE_PDL)
    return k, (x, meta((M, H)), w, y, s, meta((M, H // BLOCK), u8), w, scale, M, EPS)


def case(kernel: str) -> Sm100Case:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    return Sm100Case(name=f"flashinfer.{kernel}[bf16 {M}x{H} nvfp4]", jax=lambda: _jax(kernel),
                     torch=lambda: _torch(kernel), mma=False,
                     how=f"flashinfer.cute_dsl.{kernel}(x, ...): its _get_compiled_kernel")
