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
so on a terminal (``progress.compiling``).
"""

from __future__ import annotations

import hashlib
import time

from . import devices, dsl, flavour, hardware, progress, target
from .outputs import writes as written_params
from .compile_error import CompileError, compile_error
from .compiled import CompiledKernel, KernelSpec
from .log import describe, logger
from .plan import encode_plan


def compile_kernel(spec: KernelSpec, name: str, options: str,
                   arch: str) -> CompiledKernel:
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
    prefix = "cc_" + spec.key[:16]
    device = spec.target.device if spec.target is not None else devices.for_arch(arch)
    start = time.perf_counter()
    try:
        with progress.compiling(name, arch), dsl.dsl_compile_settings(arch), \
                hardware.answering(device) as reads:
            hook = written_params.trace_hook(spec, name)  # what the trace writes
            compiled = cute.compile(_wrapper.cutecall_entry, cuda.CUstream(0),
                                    *_wrapper.example_slots(spec), spec=spec,
                                    options=options,
                                    **({"trace_finalize_hooks": hook} if hook else {}))
            module = bytes(compiled.dump_to_object(prefix))
    except Exception as e:  # the DSL raises many types; keep the cause
        written_params.reraise(e)  # a trace that stopped the compile on purpose
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
