"""How FA4's kernels are called through ``cutecall.cutlass_call``: the
array specs (every extent a runtime value), ``vmap`` batch modes, ranks
and output shapes, and the binding of a call's values to a kernel's
parameters by name. Shared by :mod:`~cutecall.attention.kernels` and
:mod:`~cutecall.attention.split_kv`."""

from __future__ import annotations

import dataclasses
from typing import Any

from . import facts
from .config import Config

HALF, F32 = 8, 4  # elements in 16 bytes


def specs(inputs: list, outputs: list) -> dict:
    """Specs that make every extent a runtime value the kernel assumes
    nothing of, as FA4 compiles its kernels (``mark_layout_dynamic``) --
    except the contiguous dim's 16 bytes (``(rank, n)``: n elements), which
    FA4's vectorized copies need (its fake tensors say the same). So one
    compile serves every batch, length and head count, not one per
    divisibility class. `inputs`/`outputs`: ``(rank, n)`` per array leaf,
    ``(rank, n, mode)`` for a permuted view (``TensorSpec.mode``), or
    ``None`` (nothing assumed, any rank)."""
    import cutecall

    def spec(x):
        if x is None:
            return cutecall.TensorSpec(divisibility=1)
        rank, n, *mode = x
        return cutecall.TensorSpec(divisibility=(1,) * (rank - 1) + (n,),
                                   mode=mode[0] if mode else None)
    return dict(input_spec=[spec(x) for x in inputs],
                output_spec=[spec(x) for x in outputs])


def ranks(c: Config) -> tuple:
    """(q, k, statistics, dK/dV accumulator) ranks for the config's layout."""
    return (3 if c.cu_seqlens_q else 4, 3 if c.cu_seqlens_k else 4,
            2 if c.cu_seqlens_q else 3, 2 if c.cu_seqlens_k else 3)


def sds(shape, dtype):
    import jax
    return jax.ShapeDtypeStruct(tuple(shape), dtype)


def batching(c: Config, modes: list, outputs):
    """``BatchModes`` folding into dim 0 (``None``: an array shared by the
    batch; `outputs`: a count of outputs batched on dim 0, or their dims),
    or "loop" where dim 0 is not the batch (packed sequences, a page
    pool)."""
    import cutecall
    if c.cu_seqlens_q or c.cu_seqlens_k or c.paged_kv:
        return "loop"
    dims = (0,) * outputs if isinstance(outputs, int) else tuple(outputs)
    return cutecall.BatchModes(inputs=tuple(modes), outputs=dims)


def optional(*flags) -> list:
    """A batch mode 0 per present optional array."""
    return [0] * sum(bool(f) for f in flags)


def sparse_leaves(block: tuple) -> int:
    """How many arrays a blocksparse tuple holds: 0 (off) or 4 (mask and
    full blocks; zero full counts when none are given)."""
    return 4 if block else 0


def options(c: Config) -> str:
    """The compile options of `c`'s kernels: its target arch, the arch its
    objects were built for (``kernel_objects.building``)."""
    return f"--gpu-arch {c.arch}"


@dataclasses.dataclass(frozen=True)
class Site:
    """One of FA4's kernels as a call site: the ``cutlass_call`` (a recipe
    call: the kernel object is built only when no store holds the kernel),
    the launcher's parameter names (:func:`facts.launcher_params`) and the
    kernel's name."""

    call: Any
    params: tuple
    name: str


def site(role, c: Config, build, *, name: str, **call_options) -> Site:
    """The call site of the kernel `build()` makes for `role` and `c`:
    keyed by the recipe ``(role, c)`` (with FA4's and QuACK's installed
    files), so a warm process needs neither FA4 nor the CuTe DSL."""
    import cutecall
    params = facts.launcher_params(role, c, build)
    call = cutecall.cutlass_call(build, recipe=(role, c), recipe_packages=facts.PACKAGES,
                                 name=name, compile_options=options(c), **call_options)
    return Site(call, params, name)


def by_name(s: Site, outputs=(), **values) -> list:
    """The positional arguments of a call of `s`'s launcher, from `values`
    named by its ``__call__`` parameters (FA4's classes order their
    optional tails differently per arch: sm100's forward takes
    ``descale_tensors`` before ``aux_data``). Every parameter up to the last
    one named, ``None`` for those not named, the output parameters
    (`outputs`, filled by cutecall; a value named for one must be None) and
    the stream left out."""
    filled = sorted(n for n in outputs if values.pop(n, None) is not None)
    if filled:
        raise TypeError(f"cutecall.attention: {', '.join(filled)} of {s.name} are "
                        "outputs; cutecall fills them")
    params = [n for n in s.params if n not in outputs]
    unknown = sorted(set(values) - set(params))
    if unknown:
        raise TypeError(f"cutecall.attention: {s.name} has no parameter "
                        f"{', '.join(unknown)}; it takes {', '.join(params)}")
    last = max(params.index(n) for n in values)
    return [values.get(n) for n in params[:last + 1]]


def forward_args(c: Config, kernel: Site, outputs, q, k, v, scale, cu_q, cu_k, used_q, used_k,
                 page_table, left, right, sink, aux, max_seqlen_q=None, sparse=None) -> list:
    """The forward launcher's arguments (`sparse`: FA4's blocksparse tuple,
    :func:`~cutecall.attention.block_sparsity.launch_tuple`, or None). On
    sm100 ``max_seqlen_q`` is what FA4 passes: the hint, else Sq (or
    total_q packed), a runtime value."""
    named = dict(mQ=q, mK=k, mV=v, softmax_scale=scale, mCuSeqlensQ=cu_q,
                 mCuSeqlensK=cu_k, mSeqUsedQ=used_q, mSeqUsedK=used_k,
                 mPageTable=page_table, window_size_left=left, window_size_right=right,
                 learnable_sink=sink, aux_data=aux)
    if sparse is not None:
        named["blocksparse_tensors"] = sparse
    if c.family == "sm100":
        named["max_seqlen_q"] = max_seqlen_q if max_seqlen_q is not None else (
            q.shape[0] if c.cu_seqlens_q else q.shape[1])
    return by_name(kernel, outputs, **named)


def backward_args(kernel: Site, outputs, q, k, v, do, lse_log2, dpsum, dq_accum, dk_acc, dv_acc,
                  scale, cu_q, cu_k, used_q, used_k, left, right, aux, sparse=None) -> list:
    """The main backward's arguments (semaphores ``None``; `sparse`: the
    backward's blocksparse tuple or None)."""
    return by_name(kernel, outputs, mQ=q, mK=k, mV=v, mdO=do, mLSE=lse_log2, mdPsum=dpsum,
                   mdQaccum=dq_accum, mdK=dk_acc, mdV=dv_acc, softmax_scale=scale,
                   mCuSeqlensQ=cu_q, mCuSeqlensK=cu_k, mSeqUsedQ=used_q, mSeqUsedK=used_k,
                   window_size_left=left, window_size_right=right, aux_data=aux,
                   blocksparse_tensors=sparse, mCuTotalMBlocks=None)
