"""cutecall: run CuTe DSL kernels inside JAX programs, from PyTorch and from
C++, through one C++ runtime.

    import cutecall
    call = cutecall.cutlass_call(launcher, output_shape_dtype=...)
    y = call(x)

Where things live (``docs/architecture.md`` has the whole map):
``cutecall.jax`` (the JAX front), ``cutecall.torch`` (the PyTorch front),
``cutecall._driver`` (the compile driver both share), ``cutecall.bundle``
(kernels on disk for C++ and DSL-free processes), ``cutecall.compat`` (other
bridges' APIs: ``cutecall.ejkernel``, NVIDIA's ``cutlass.jax`` names),
``cutecall.cli`` (the ``cutecall`` command), ``cutecall.examples``.
"""

from ._version import __version__
from ._driver.compile_error import StaticFallbackWarning
from ._driver.compiler import (CompileError, CompiledKernel, clear_cache,
                               compile_stats)
from ._driver.runtime import launch_blocking, set_launch_blocking
from ._driver.spec import TensorSpec
from .jax import (BatchModes, CompiledCall, CutlassCall, Differentiable,
                  DifferentiationError, VmapFallbackWarning, compile,
                  cutlass_call, differentiable, jax_export_checks, register)
from .bundle import Bundle, BundleError, export, load_bundle
from .ejkernel import build_cute_ffi_call, cute_call, has_cute_ffi_support
from ._autotune import Autotuned, TuningResult, autotune
from ._warmup import WarmupReport, jax_task as jax_warmup_task, \
    torch_task as torch_warmup_task, warmup
from . import testing  # NVIDIA's cutlass.jax.testing, read on first use
from .compat._nvidia_names import (  # the rest of cutlass.jax's names
    CUTE_DSL_JAX_MIN_SUPPORTED_PYTHON_VERSION,
    CUTE_DSL_MIN_SUPPORTED_JAX_VERSION, JaxArray, TensorMode,
    cutlass_to_jax_dtype, cutlass_to_jax_layout_order,
    disable_automatic_ffi_registration, find_cute_dsl_runtime_library,
    from_dlpack, get_cutlass_call_ffi_name, get_cutlass_call_ffi_version,
    get_export_disabled_safety_checks, is_available, is_ffi_registered,
    jax_to_cutlass_dtype, jax_to_cutlass_layout_order, register_ffi,
    release_compile_cache, set_ffi_call_targets)

__all__ = [
    "cutlass_call",
    "CutlassCall",
    "TensorSpec",
    "BatchModes",
    "VmapFallbackWarning",
    "differentiable",
    "Differentiable",
    "DifferentiationError",
    "CompileError",
    "StaticFallbackWarning",
    "CompiledKernel",
    "CompiledCall",
    "compile",
    "export",
    "load_bundle",
    "Bundle",
    "BundleError",
    "register",
    "jax_export_checks",
    "compile_stats",
    "clear_cache",
    "autotune",
    "Autotuned",
    "TuningResult",
    "set_launch_blocking",
    "launch_blocking",
    "warmup",
    "jax_warmup_task",
    "torch_warmup_task",
    "WarmupReport",
    "cute_call",
    "build_cute_ffi_call",
    "has_cute_ffi_support",
    # NVIDIA's cutlass.jax names (cutlass_call and TensorSpec are above)
    "CUTE_DSL_MIN_SUPPORTED_JAX_VERSION",
    "CUTE_DSL_JAX_MIN_SUPPORTED_PYTHON_VERSION",
    "jax_to_cutlass_dtype",
    "cutlass_to_jax_dtype",
    "jax_to_cutlass_layout_order",
    "cutlass_to_jax_layout_order",
    "from_dlpack",
    "JaxArray",
    "TensorMode",
    "release_compile_cache",
    "get_export_disabled_safety_checks",
    "find_cute_dsl_runtime_library",
    "is_ffi_registered",
    "register_ffi",
    "set_ffi_call_targets",
    "disable_automatic_ffi_registration",
    "get_cutlass_call_ffi_name",
    "get_cutlass_call_ffi_version",
    "is_available",
    "testing",
]
