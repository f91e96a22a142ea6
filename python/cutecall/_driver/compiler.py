"""One compile: a :class:`KernelSpec` in, a validated
:class:`CompiledKernel` out (object bytes, function prefix, launch plan).

``cute.compile`` runs on cutecall's generated entry point (``wrapper``) for
the target arch; the object is taken with ``dump_to_object`` and checked by
the C++ core before anything keeps it: the plan parses
(``_core.KernelEntry``) and the object defines the function. While it traces,
the device answers from the target (``hardware.answering``), and what the
kernel read is kept (``CompiledKernel.device_reads``). Callers hold
``store.memory.lock`` (the DSL is not thread-safe); ``store.memory``
decides when to compile. A compile that runs past a couple of seconds says
so on a terminal (``progress.compiling``). :func:`trace_kernel` runs the
trace alone, for a question about the module it makes (``outputs``: what
the kernel writes); the DSL's passes never run.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import Any, Callable

from . import devices, dsl, flavour, hardware, progress, target
from .compile_error import CompileError, compile_error
from .compiled import CompiledKernel, KernelSpec
from .log import describe, logger
from .plan import encode_plan


def _dsl(spec: KernelSpec, name: str, arch: str):
    """The DSL, imported and checked for `arch`: (cute, the CUstream type,
    the generated entry's module, the device the trace answers from).
    Raises before any trace (a flavour or arch error is no compile's)."""
    flavour.selected()  # FlavourError (not a compile failure: no fallback)
    try:
        import cuda.bindings.driver as cuda
        import cutlass.cute as cute

        from . import wrapper as _wrapper
    except ImportError as e:
        raise CompileError(
            f"cutecall: compiling kernel '{name}' needs the CuTe DSL "
            f"(pip install 'cutecall[cu12]' or 'cutecall[cu13]'): {e}", kernel=name,
            arch=arch, root_cause=f"the CuTe DSL is not importable: {e}") from e
    from cutlass.base_dsl.enums import Arch
    target.check_arch(arch, Arch.__members__)
    device = spec.target.device if spec.target is not None else devices.for_arch(arch)
    return cute, cuda.CUstream, _wrapper, device


@contextlib.contextmanager
def _tracing(name: str, arch: str, device, verb: str = "compiling"):
    """While the DSL traces: a progress line, its settings for `arch`, the
    device answering from the target; yields what the kernel reads."""
    with progress.compiling(name, arch, verb), dsl.dsl_compile_settings(arch), \
            hardware.answering(device) as reads:
        yield reads


class _Traced(Exception):
    """Stops a compile after its trace (:func:`trace_kernel`'s own)."""


def trace_kernel(spec: KernelSpec, name: str, options: str, arch: str,
                 read: Callable[[Any, str], Any]) -> Any:
    """``read(module, function_name)`` of the module the DSL traces for
    `spec`, before any of its passes (they never run: a trace costs a
    fraction of a compile). None when the installed DSL cannot stop after a
    trace (no ``trace_finalize_hooks``). Raises the :class:`CompileError`
    of a trace that fails."""
    if not dsl_has_trace_hooks():
        return None
    cute, stream, wrapper, device = _dsl(spec, name, arch)
    found = []

    def hook(owner, module, function_name):
        try:
            found.append(read(module, function_name))
        except Exception:  # noqa: BLE001 - a reading that fails learns nothing
            found.append(None)
        raise _Traced
    try:
        with _tracing(name, arch, device, "tracing"):
            try:
                cute.compile(wrapper.cutecall_entry, stream(0),
                             *wrapper.example_slots(spec), spec=spec, options=options,
                             trace_finalize_hooks=hook)
            except Exception:  # the DSL wraps what the hook raised
                if not found:
                    raise
    except Exception as e:  # the DSL raises many types; keep the cause
        raise compile_error(e, name, arch, spec.binding) from e
    return found[0] if found else None


def dsl_has_trace_hooks() -> bool:
    """Whether the installed DSL takes ``cute.compile(...,
    trace_finalize_hooks=)`` (4.8 does)."""
    try:
        from cutlass.base_dsl.dsl import BaseDSL
    except ImportError:
        return False
    return hasattr(BaseDSL, "trace_finalize_hooks")


def compile_kernel(spec: KernelSpec, name: str, options: str,
                   arch: str) -> CompiledKernel:
    cute, stream, wrapper, device = _dsl(spec, name, arch)
    prefix = "cc_" + spec.key[:16]
    start = time.perf_counter()
    try:
        with _tracing(name, arch, device) as reads:
            compiled = cute.compile(wrapper.cutecall_entry, stream(0),
                                    *wrapper.example_slots(spec), spec=spec,
                                    options=options)
            module = bytes(compiled.dump_to_object(prefix))
    except Exception as e:  # the DSL raises many types; keep the cause
        raise compile_error(e, name, arch, spec.binding) from e
    seconds = time.perf_counter() - start
    logger.info("compiled kernel '%s' for %s in %.2f s: %s (key %s)", name, arch,
                seconds, describe(spec), spec.key[:16])
    plan = encode_plan(spec.operands, spec.num_args, spec.num_rets,
                       len(spec.scalar_types))
    names = ",".join(op.name for op in spec.operands)
    symbols = ",".join(spec.symbols)
    sha256 = hashlib.sha256(module).hexdigest()
    from .. import _core
    entry = _core.KernelEntry(  # parses the plan: the one parse of a miss
        module=module, sha256=sha256, function=prefix, kernel=name,
        plan=plan.tolist(), operand_names=names, symbol_names=symbols)
    _core.check_object(module, prefix)
    return CompiledKernel(
        name=name, key=spec.key, module=module, sha256=sha256, function=prefix,
        plan=tuple(int(x) for x in plan), operand_names=names,
        symbol_names=symbols, num_slots=entry.num_slots, arch=arch,
        compile_seconds=seconds, device_reads=tuple(sorted(reads.items())), entry=entry)
