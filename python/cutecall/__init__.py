"""cutecall: run CuTe DSL kernels inside JAX programs through a C++ runtime.

    import cutecall
    call = cutecall.cutlass_call(launcher, output_shape_dtype=...)
    y = call(x)
"""

__version__ = "0.1.0"

from ._api import CutlassCall, cutlass_call
from ._autodiff import Differentiable, DifferentiationError, differentiable
from ._batching import BatchModes, VmapFallbackWarning
from ._bundle import Bundle, BundleError, export, load_bundle
from ._compile import CompileError, CompiledKernel, clear_cache, compile_stats
from ._compile_error import StaticFallbackWarning
from ._contract import CompiledCall, compile, jax_export_checks, register
from ._spec import TensorSpec
from .ejkernel import build_cute_ffi_call, cute_call, has_cute_ffi_support

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
    "cute_call",
    "build_cute_ffi_call",
    "has_cute_ffi_support",
]
