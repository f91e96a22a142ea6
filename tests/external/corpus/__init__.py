"""Kernels written by other people, called the way their authors call them.

The corpus behind ``tests/external`` and ``bench/external``, kept out of
the wheel: importable as ``corpus`` once ``tests/external`` is on
``sys.path`` (``tests/external/conftest.py`` puts it there;
``bench/harness.use_corpus`` loads it from its path). CuTe DSL
kernels from ``quack-kernels`` (``quack_corpus``) and ``flash-attn-4``
(``fa4_corpus``), each launched through cutecall's JAX front
(``cutecall.cutlass_call``) and torch front (``cutecall.torch.kernel``)
with default specs -- no ``TensorSpec`` tuning -- and through the authors'
own launch paths, for comparison.

Each corpus module defines ``cases(size) -> list[Case]``; ``size`` is
``"test"`` (small shapes: CPU compiles and GPU numerics) or ``"bench"``
(the shapes ``bench/external`` times). Building a case imports nothing
heavy; its callables import the third-party package when called.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Case:
    """One third-party kernel at one shape.

    Attributes:
      name: ``"<package>.<kernel>[<shape>]"``, e.g.
        ``"quack.softmax_fwd[bf16 4096x1024]"``.
      jax: ``jax(concrete, seed) -> (call, args)``: a
        ``cutecall.cutlass_call`` object built from the author's launcher
        with default specs, and the positional arguments of one call.
        ``concrete=False`` gives ``jax.ShapeDtypeStruct`` arguments (lower /
        compile without a GPU); ``True`` gives random device arrays.
      jax_reference: ``jax_reference(*args) -> outputs``, a plain-JAX
        reference with the structure of ``call(*args)``.
      torch: ``torch(device, seed) -> (kernel, args)``: a
        ``cutecall.torch.kernel`` launch object and the positional arguments
        of one call, outputs preallocated among them (launcher order).
        ``device="meta"`` gives meta tensors (``kernel.compile(*args)``
        without a GPU).
      torch_outputs: the positions in the torch args that the kernel writes.
      torch_reference: ``torch_reference(*args) -> tuple`` of the expected
        values of ``torch_outputs``, in that order (computed in float32 or
        better from the inputs).
      authors_torch: ``authors_torch(*args) -> None``: the authors' own
        torch entry point writing the same outputs (``None`` if they have
        none for this kernel).
      authors_jax: ``authors_jax(*args) -> outputs``: the authors' own JAX
        path (QuACK's jax-tvm-ffi functions), or ``None``.
      atol, rtol: tolerances against the references.
    """

    name: str
    jax: Callable[[bool, int], tuple[Any, tuple]]
    jax_reference: Callable[..., Any]
    torch: Callable[[str, int], tuple[Any, tuple]]
    torch_outputs: tuple[int, ...]
    torch_reference: Callable[..., tuple]
    authors_torch: Callable[..., None] | None = None
    authors_jax: Callable[..., Any] | None = None
    atol: float = 2e-2
    rtol: float = 2e-2


def split_arrays(args) -> tuple[list, Callable[[Sequence], list]]:
    """(the array arguments of a call, a function putting arrays back among
    the others): ``None`` and runtime scalars stay Python values, as a user
    passes them -- what a test or benchmark needs to put a call in a jit
    whose parameters are the arrays alone."""
    positions = [i for i, a in enumerate(args) if hasattr(a, "shape")]

    def rebuild(arrays: Sequence) -> list:
        full = list(args)
        for i, a in zip(positions, arrays):
            full[i] = a
        return full
    return [args[i] for i in positions], rebuild
