"""The JAX front's checks of a call's arguments, for the errors that name
the argument: a torch tensor where a JAX array goes, ``output_shape_dtype``
failing on arguments no binding fits, output counts that fit no
parameters, and an eager call whose arrays are on a CPU (refused before
compiling)."""

from __future__ import annotations

import contextlib
import contextvars

import jax

from .._driver import call_checks
from ._args import leaf_names


def refuse_torch_tensor(x, what: str) -> None:
    """A torch tensor passed to a JAX call says how to make a JAX array of
    it (the other arguments are ``binding.check_arguments``')."""
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "shape"):
        raise TypeError(
            f"cutecall: {what} is a torch tensor {call_checks.show(x)}; cutlass_call "
            "takes JAX arrays: pass jax.dlpack.from_dlpack(x) (the same memory) or "
            "jnp.asarray(x.cpu().numpy()), or launch it with cutecall.torch.kernel")


def raise_if_unfit(call, args, kwargs, error: Exception) -> None:
    """`call`'s ``output_shape_dtype`` raised `error` on the call's
    arguments (the README's ``lambda a, b: ShapeDtypeStruct(a.shape, ...)``
    given a float): when no binding of the launcher fits the arguments
    either, that is the error to show, naming the argument."""
    try:
        launcher = call.launcher
        message = call_checks.explain_any_outputs(
            launcher.sig, args, kwargs, {k for k, _ in launcher.constexprs},
            call.operand_order)
    except Exception:  # the launcher cannot tell: the original error stands
        return
    if message is not None:
        raise TypeError(f"{message}; output_shape_dtype raised "
                        f"{type(error).__name__}: {error}") from error


def check_counts(call, args, kwargs, num_outputs: int) -> None:
    """The call's positional arguments and ``output_shape_dtype``'s
    `num_outputs` outputs fit the launcher's parameters in number."""
    launcher = call.launcher
    call_checks.check_counts(launcher.sig, len(args), num_outputs, kwargs,
                             {k for k, _ in launcher.constexprs}, "output_shape_dtype")


GPU_PLATFORMS = ("gpu", "cuda")
_off_gpu = contextvars.ContextVar("cutecall_off_gpu", default=None)


@contextlib.contextmanager
def eager_platform(call, binding, arrays):
    """While a call is traced: what :func:`refuse_off_gpu` checks -- an
    eager call (no argument traced) whose arrays are on a CPU could only
    fail after compiling. Read only when the call is traced (a miss of its
    trace cache), so an eager call pays a context variable."""
    token = _off_gpu.set((call, binding, arrays))
    try:
        yield
    finally:
        _off_gpu.reset(token)


def refuse_off_gpu() -> None:
    """Raises, before a compile, for an eager call that cannot run, naming
    the array that puts it on a CPU, or the default device."""
    found = _off_gpu.get()
    reason = _off_gpu_reason(*found) if found is not None else None
    if reason is not None:
        raise NotImplementedError(reason)


def _off_gpu_reason(call, binding, arrays) -> str | None:
    if any(isinstance(x, jax.core.Tracer) for x in arrays):
        return None
    committed = [(k, x) for k, x in enumerate(arrays)
                 if isinstance(x, jax.Array) and getattr(x, "committed", False)]
    if committed:
        k, x = committed[0]
        platform = next(iter(x.devices())).platform
        where = f"argument {leaf_names(call, binding)[k]!r} is on {x.devices()}"
    else:
        default = jax.config.jax_default_device
        platform = getattr(default, "platform", default) or jax.default_backend()
        where = f"its arrays go to the default device, a {platform} device"
    if platform in GPU_PLATFORMS:
        return None
    return (f"cutecall: kernel '{call.name}' runs only on CUDA GPUs, but {where}. "
            "Put the inputs on a GPU (jax.device_put(x, jax.devices('gpu')[0])), or "
            "inspect the call without one: call.lower(*args) or "
            "jax.jit(f).trace(*args).lower(lowering_platforms=('cuda',)).")
