"""Where a kernel's invalid IR comes from in the user's source.

The CuTe DSL makes its MLIR ops without source locations, so when the
module fails verification (``'cute.memref.store' op expects coordinate to
be weakly congruent to the layout``) the error says ``unknown``: no file,
no line. When the call's error is such a one, :func:`locate` traces the
kernel once more with the DSL's traceback locations on
(``dsl.loc_tracebacks``: each op records the Python frames that made it),
reads the innermost frame of the user's (or the kernel author's) code from
the verifier's error (``user_frames.user_location``) and puts it on the
error's first line. The second trace stops where the first did -- at
verification, before the costly passes -- and runs once per failed form:
the place is remembered by the form's key.
No framework; the CuTe DSL only inside the trace.
"""

from __future__ import annotations

import collections
from typing import Callable

from . import devices, dsl, hardware
from .compile_error import CompileError, unlocated
from .user_frames import failing_source, user_location
from .compiled import KernelSpec

DEPTH = 24  # frames each op records: the user's line sits a few below the op


# Places found, by the failed form's key (bounded: a failure path).
_found: collections.OrderedDict[str, tuple] = collections.OrderedDict()
_CAPACITY = 256


def attach(error: CompileError, spec: Callable[[], KernelSpec],
           retrace: Callable[[KernelSpec], BaseException | None]) -> None:
    """Lets :func:`located` find `error`'s place later, when it is the
    error a user sees (a placement probe's error is passed over): `spec`
    gives the failed form, `retrace(spec)` traces it again."""
    error.locate = lambda: locate(error, spec, retrace)


def located(error: BaseException) -> BaseException:
    """`error` with its place found (:func:`attach`), else as it is."""
    find = getattr(error, "locate", None)
    return find() if callable(find) else error


def locate(error: CompileError, spec: Callable[[], KernelSpec],
           retrace: Callable[[KernelSpec], BaseException | None]) -> CompileError:
    """`error` with the place its invalid IR was made on its first line,
    when the DSL's message has none (``compile_error.unlocated``) and a
    second trace (`retrace`: the failure's exception, or None) finds it.
    The place is kept by the form's key: the same call failing again (or
    compiled again) is not traced again."""
    if not unlocated(error):
        return error
    form = spec()
    found = _found.get(form.key)
    if found is None:
        try:
            exc = retrace(form)
        except Exception:  # noqa: BLE001 -- a failed second look changes nothing
            exc = None
        found = (user_location(exc), failing_source(exc)) if exc is not None else ("", "")
        _found[form.key] = found
        while len(_found) > _CAPACITY:
            _found.popitem(last=False)
    return error.relocated(*found) if found[0] else error


def retrace(spec: KernelSpec, options: str, arch: str) -> BaseException | None:
    """Traces `spec`'s kernel again with op locations on; the exception the
    compile raises (None if it compiles, or the switch is missing).
    Callers hold the compile lock (``store.memory.lock``)."""
    import cuda.bindings.driver as cuda
    import cutlass.cute as cute

    from . import wrapper
    device = spec.target.device if spec.target is not None else devices.for_arch(arch)
    with dsl.dsl_compile_settings(arch), hardware.answering(device), \
            dsl.loc_tracebacks(DEPTH) as on:
        if not on:
            return None
        try:
            cute.compile(wrapper.cutecall_entry, cuda.CUstream(0),
                         *wrapper.example_slots(spec), spec=spec, options=options)
        except Exception as e:  # noqa: BLE001 -- the failure is what is read
            return e
    return None
