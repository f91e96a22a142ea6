"""cutecall: run CuTe DSL kernels inside JAX programs, from PyTorch and from
C++, through one C++ runtime.

    import cutecall
    call = cutecall.cutlass_call(launcher, output_shape_dtype=...)
    y = call(x)

``import cutecall`` imports neither JAX nor torch: every public name below
loads its module on first use, so a PyTorch user (``cutecall.torch``) never
imports JAX and a JAX user never imports torch.

Where things live (``docs/architecture.md`` has the whole map):
``cutecall.jax`` (the JAX front), ``cutecall.torch`` (the PyTorch front),
``cutecall._driver`` (the one pipeline both share), ``cutecall.bundle``
(kernels on disk for C++ and DSL-free processes), ``cutecall.services``
(warm-up and autotuning), ``cutecall.compat`` (other bridges' APIs:
``cutecall.ejkernel``, NVIDIA's ``cutlass.jax`` names), ``cutecall.cli``
(the ``cutecall`` command), ``cutecall.examples``.
"""

from __future__ import annotations

import importlib
import os

from ._version import __version__

if os.environ.get("CUTECALL_DSL_FLAVOUR"):  # make the DSL load the pinned flavour
    from ._driver import flavour as _flavour
    _flavour.pin_dsl()

# Public name -> the module that defines it (imported on first use).
_NAMES = {
    "StaticFallbackWarning": "._driver.compile_error",
    "CompileError": "._driver.compile_error",
    "CacheError": "._driver.store.local_files",
    "FlavourError": "._driver.flavour",
    "CompiledKernel": "._driver.compiled",
    "compile_stats": "._driver.store.memory",
    "clear_cache": "._driver.store.memory",
    "share_jax_cache": ".jax._cache",
    "launch_blocking": "._driver.runtime",
    "set_launch_blocking": "._driver.runtime",
    "TensorSpec": "._driver.tensor_spec",
    **dict.fromkeys(("Target", "current_target", "dsl_arch"), "._driver.target"),
    "compile_args": "._driver.dsl",  # a library's cute.compile arguments, uncompiled
    "DeviceProps": "._driver.devices",
    "recipe_fact": "._driver.recipe",
    "import_skipping_init": "._driver.lazy_import",
    "DEVICES": "._driver.devices",
    **dict.fromkeys(
        ("cutlass_call", "CutlassCall", "BatchModes", "VmapFallbackWarning",
         "differentiable", "Differentiable", "DifferentiationError",
         "CompiledCall", "compile", "register", "jax_export_checks"), ".jax"),
    **dict.fromkeys(("export", "load_bundle", "Bundle", "BundleError"), ".bundle"),
    **dict.fromkeys(("autotune", "Autotuned", "TuningResult"), ".services.autotune"),
    **dict.fromkeys(("warmup", "WarmupReport", "jax_warmup_task", "torch_warmup_task"),
                    ".services.warmup"),
    **dict.fromkeys(("cute_call", "build_cute_ffi_call", "has_cute_ffi_support"),
                    ".ejkernel"),
    # the rest of NVIDIA's cutlass.jax names (cutlass_call and TensorSpec above)
    **dict.fromkeys(
        ("jax_to_cutlass_dtype", "cutlass_to_jax_dtype", "jax_to_cutlass_layout_order",
         "cutlass_to_jax_layout_order", "from_dlpack", "JaxArray"), ".compat._nvidia_types"),
    **dict.fromkeys(
        ("CUTE_DSL_MIN_SUPPORTED_JAX_VERSION",
         "CUTE_DSL_JAX_MIN_SUPPORTED_PYTHON_VERSION", "TensorMode",
         "release_compile_cache", "get_export_disabled_safety_checks",
         "find_cute_dsl_runtime_library", "is_ffi_registered", "register_ffi",
         "set_ffi_call_targets", "disable_automatic_ffi_registration",
         "get_cutlass_call_ffi_name", "get_cutlass_call_ffi_version",
         "is_available"), ".compat._nvidia_names"),
}
# Submodules reached as attributes (``cutecall.testing``, NVIDIA's helpers).
_MODULES = {"testing": ".testing"}

__all__ = list(_NAMES) + list(_MODULES)


def __getattr__(name: str):
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name], __name__)
    elif name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
