"""Blackwell (sm100) kernels of the corpus: third-party CuTe DSL kernels
built for ``sm_100a`` and called the way their authors call them, through
cutecall's JAX front and its torch front, compile-only on any host (no
GPU).

Each ``*_sm100`` corpus module defines ``cases() -> list[Sm100Case]``. A
case builds its kernel objects for the target (:func:`building`: the DSL's
arch is sm_100a and what a constructor or a trace reads of the GPU --
``cutlass.utils.HardwareInfo``, the driver's attributes -- answers with the
target's device, a B200 unless ``$CUTECALL_DEVICE`` names another), so
kernels that size themselves from the GPU (persistent grids, cluster
counts) see the GPU they are compiled for, never the host's.

Building a case imports nothing heavy; its callables import the
third-party package, the DSL, torch and JAX when called.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

ARCH = "sm_100a"


@dataclasses.dataclass(frozen=True)
class Sm100Case:
    """One third-party sm100 kernel, as its authors build and call it.

    Attributes:
      name: ``"<package>.<kernel>[<config>]"``.
      jax: ``jax() -> (fn, args)``: ``fn(*args)`` runs the kernel through
        cutecall's JAX front (a ``cutecall.cutlass_call``, or the authors'
        own JAX function with cutecall's bridge in it); `args` holds
        ``jax.ShapeDtypeStruct`` for arrays and the Python values the
        authors pass, so ``jax.jit`` over the arrays lowers it for CUDA.
      torch: ``torch() -> (kernel, args)``: a ``cutecall.torch.Kernel`` and
        its arguments in the launcher's order, tensors on "meta" (for
        ``kernel.compile(*args)``), outputs preallocated among them.
      mma: the kernel runs tcgen05 MMAs (its SASS must have them).
      how: one line on how its authors build and call it (for the docs).
    """

    name: str
    jax: Callable[[], tuple[Callable, tuple]]
    torch: Callable[[], tuple[Any, tuple]]
    mma: bool = True
    how: str = ""


def target(device=None):
    """``cutecall.current_target("sm_100a", device)``: the arch and the
    device (default: ``$CUTECALL_DEVICE``'s row, else the B200) kernels of
    these cases compile for."""
    import cutecall
    return cutecall.current_target(ARCH, device)


def building(device=None):
    """Kernel objects built inside are for :func:`target`."""
    return target(device).building()


@contextlib.contextmanager
def torch_sees_target(device=None):
    """Inside, torch's CUDA device queries (``is_available``,
    ``current_device``, ``get_device_capability``,
    ``get_device_properties``) answer with :func:`target`'s device, as
    cutecall's ``building()`` answers ``HardwareInfo`` and the driver's:
    cuDNN's and FlashInfer's host code asks torch (for the capability, the
    opt-in shared memory per block) when it checks support or sizes a
    kernel object. Restored afterwards."""
    import types

    import torch
    props = target(device).device
    answers = types.SimpleNamespace(
        name=props.name, major=props.capability[0], minor=props.capability[1],
        multi_processor_count=props.sm_count, l2_cache_size=props.l2_bytes,
        shared_memory_per_block_optin=props.smem_per_block_optin,
        shared_memory_per_multiprocessor=props.smem_per_sm)
    patched = {"is_available": lambda: True, "current_device": lambda: 0,
               "get_device_capability": lambda *a: props.capability,
               "get_device_properties": lambda *a: answers}
    saved = {name: getattr(torch.cuda, name) for name in patched}
    for name, answer in patched.items():
        setattr(torch.cuda, name, answer)
    try:
        yield answers
    finally:
        for name, original in saved.items():
            setattr(torch.cuda, name, original)


def meta(shape, dtype=None):
    """An empty torch tensor on "meta" (default bfloat16)."""
    import torch
    return torch.empty(tuple(shape), dtype=dtype or torch.bfloat16, device="meta")


def sds(shape, dtype):
    """A ``jax.ShapeDtypeStruct``."""
    import jax
    return jax.ShapeDtypeStruct(tuple(shape), dtype)
