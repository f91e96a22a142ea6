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


def meta(shape, dtype=None):
    """An empty torch tensor on "meta" (default bfloat16)."""
    import torch
    return torch.empty(tuple(shape), dtype=dtype or torch.bfloat16, device="meta")


def sds(shape, dtype):
    """A ``jax.ShapeDtypeStruct``."""
    import jax
    return jax.ShapeDtypeStruct(tuple(shape), dtype)
