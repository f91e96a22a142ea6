"""QuACK's GEMMs with epilogues, called the way QuACK calls them.

Five of QuACK's sm90 GEMMs, each QuACK's own kernel object (captured from
its public torch entry point by ``quack_gemm_cases.captured``, QuACK's
untuned configuration) handed to cutecall unchanged, with QuACK's argument
containers. The launcher of every one::

    Gemm(mA, mB, mD, mC, epilogue_args, scheduler_args, varlen_args, stream,
         mSFA=None, mSFB=None)

=================  ======================================================
``gemm_add``       ``GemmDefaultSm90``: D = alpha A B + beta C + bias
                   (``gemm_interface.gemm_add``); alpha, beta runtime
                   ``Float32`` fields of its ``EpilogueArguments``
``gemm_act``       QuACK's minted ``linear_act_mod`` GEMM: D = A B + bias,
                   ``epilogue_args.mAuxOut`` = gelu_tanh(D) (``gemm_act``)
``gemm_dact``      its backward (``gemm_dact``): C = preact, D = (A B) *
                   gelu'(C), ``mAuxOut`` = gelu(C)
``gemm_symmetric`` ``GemmSymmetricSm90``: D = alpha A A^T on a triangular
                   schedule, written through mD and through ``mAuxOut`` =
                   D^T, a view of the same buffer (``gemm_symmetric``)
``gemm_varlen_m``  ``GemmDefaultSm90`` grouped by ``VarlenArguments(
                   mCuSeqlensM=...)``: rows cu[i]:cu[i+1] of A times B[i]
                   (``gemm(..., cu_seqlens_m=)``, an MoE expert GEMM)
=================  ======================================================

All tile 128x192, cluster 2x1, pingpong (QuACK's sm90 default) except the
symmetric GEMM (128x256, cluster 2x1, cooperative: QuACK's fixed choice);
static persistent scheduler. B crosses as (K, N) except for the symmetric
GEMM (B = A, (M, K)) and varlen (a (L, K, N) array seen as (L, N, K) through
``TensorSpec(mode=(0, 2, 1))``, QuACK's ``B.mT``). JAX::

    call = cutecall.cutlass_call(gemm_act_kernel, output_params=("mD",),
        output_shape_dtype=..., input_output_aliases={(3, "mAuxOut"): 1})
    preact, postact = call(a, b, None, epi(mRowVecBroadcast=bias,
                                           mAuxOut=buffer), sched, None)

The same, runnable (``concrete=False`` gives ShapeDtypeStructs, for
``call.lower(*args)`` without a GPU)::

    from corpus import quack_gemm_corpus as corpus
    call, args = corpus.case("gemm_act", 1000, 768, 256).jax(True, 0)
    preact, postact = call(*args)   # args = (a, b, None, epi, sched, None)

``output_params=("mD",)`` places D; an output written inside the
``EpilogueArguments`` is an input leaf aliased to an output by key path; the
symmetric GEMM also names D's parameter, so D reaches mD and its alias
``epilogue_args.mAuxOut`` (spec ``mode=(1, 0)``: the transposed view).
torch: ``kernel(a, b, d, c, epi, sched, varlen)``, D and the epilogue's
outputs written in place (``Case.torch_outputs`` (2, 4): D, and the
``EpilogueArguments`` whose ``mAuxOut`` the reference gives as a dict).

Sizes (M, N, K) ("varlen": (sequence lengths, N, K)): ``"test"``: M 1001 or
1000 (not multiples of 16); ``"bench"``: 4096^3, Llama-3-8B's MLP (4096
tokens, 4096 -> 14336) for act/dact, 8 uneven experts of 16384 tokens
for varlen. bf16 operands and outputs, float32 bias.
"""

from __future__ import annotations

import functools

from . import Case
from . import quack_gemm_cases as qc
from .quack_common import JaxRandom, TorchRandom, bf16, like, sds

__all__ = ["KERNELS", "SHAPES", "cases", "case", "jax_call", "torch_kernel",
           "jax_args_from_torch"]

KERNELS = ("gemm_add", "gemm_act", "gemm_dact", "gemm_symmetric", "gemm_varlen_m")
SHAPES = {
    "test": {"gemm_add": (1001, 512, 256), "gemm_act": (1000, 768, 256),
             "gemm_dact": (1000, 768, 256), "gemm_symmetric": (1000, 1000, 256),
             "gemm_varlen_m": ((300, 1, 717), 512, 256)},
    "bench": {"gemm_add": (4096, 4096, 4096), "gemm_act": (4096, 14336, 4096),
              "gemm_dact": (4096, 14336, 4096), "gemm_symmetric": (4096, 4096, 4096),
              "gemm_varlen_m": ((1536, 2560, 2048, 1024, 3072, 2048, 1792, 2304),
                                2048, 4096)},
}
ALPHA, BETA = 0.5, 2.0
# What each kernel writes besides D: an output inside its EpilogueArguments.
_EPILOGUE_OUTPUT = {"gemm_act": "mAuxOut", "gemm_dact": "mAuxOut"}


def cases(size: str) -> list[Case]:
    """The QuACK GEMM cases at `size` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(k, *SHAPES[size][k]) for k in KERNELS]


@functools.lru_cache(maxsize=None)
def jax_call(kernel: str):
    """The ``cutlass_call`` of QuACK's kernel object for `kernel`:
    ``call(a, b, c, epilogue_args, scheduler_args, varlen_args)``."""
    import cutecall
    aliases, spec = None, None
    if kernel in _EPILOGUE_OUTPUT:
        aliases = {(3, _EPILOGUE_OUTPUT[kernel]): 1}
    elif kernel == "gemm_symmetric":
        aliases = {(3, "mAuxOut"): 0}
        spec = {"epilogue_args.mAuxOut": cutecall.TensorSpec(mode=(1, 0))}
    elif kernel == "gemm_varlen_m":
        spec = {"mB": cutecall.TensorSpec(mode=(0, 2, 1))}

    def outputs(a, b, c, epi, sched, var):
        if kernel == "gemm_symmetric":
            return like(epi.mAuxOut)
        d = sds((a.shape[0], b.shape[-1]), a.dtype)
        return (d, like(epi.mAuxOut)) if kernel in _EPILOGUE_OUTPUT else d
    return cutecall.cutlass_call(qc.kernel_object(kernel), output_shape_dtype=outputs,
                                 output_params=("mD",), input_output_aliases=aliases,
                                 input_spec=spec)


@functools.lru_cache(maxsize=None)
def torch_kernel(kernel: str):
    """The ``cutecall.torch.kernel`` of the same object (D named: mD sits
    between inputs)."""
    import cutecall.torch
    return cutecall.torch.kernel(qc.kernel_object(kernel), outputs=("mD",))


def _name(kernel, m, n, k) -> str:
    rows = f"{len(m)}x{sum(m)}" if isinstance(m, tuple) else m
    return f"quack.{kernel}[bf16 {rows}x{n}x{k}]"


def case(kernel: str, m, n: int, k: int) -> Case:
    """`kernel` (a ``KERNELS`` entry) at M (for varlen: the sequence
    lengths), N, K; N and K multiples of 8 (16-byte rows for TMA)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "gemm_symmetric" and m != n:
        raise ValueError(f"gemm_symmetric is square: M = {m} != N = {n}")
    lengths = m if kernel == "gemm_varlen_m" else None
    rows = sum(m) if lengths else m
    k_scale = k ** -0.5  # B ~ N(0, 1/K): outputs of unit scale

    def operands(r, lib_bf16, f32):
        """(a, b, c, the epilogue's fields) as `r` draws them."""
        a = r.normal((rows, k), lib_bf16)
        if kernel == "gemm_symmetric":
            return a, a, None, {"alpha": ALPHA}
        if lengths:
            return a, r.normal((len(lengths), k, n), lib_bf16, k_scale), None, {}
        b = r.normal((k, n), lib_bf16, k_scale)
        if kernel == "gemm_add":
            return a, b, r.normal((rows, n), lib_bf16), dict(
                alpha=ALPHA, beta=BETA, mRowVecBroadcast=r.normal((1, n), f32))
        if kernel == "gemm_act":
            return a, b, None, {"mRowVecBroadcast": r.normal((n,), f32)}
        return a, b, r.normal((rows, n), lib_bf16), {}  # dact: c = preact

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        a, b, c, fields = operands(r, jnp.bfloat16, jnp.float32)

        def buffer(shape):  # written by the kernel: initial values unused
            return jnp.zeros(shape, jnp.bfloat16) if concrete else sds(shape, jnp.bfloat16)
        if kernel in _EPILOGUE_OUTPUT:
            fields[_EPILOGUE_OUTPUT[kernel]] = buffer((rows, n))
        elif kernel == "gemm_symmetric":
            fields["mAuxOut"] = buffer((rows, rows))
        var = None
        if lengths:
            cu = _cumulative(lengths)
            var = qc.varlen(jnp.asarray(cu, jnp.int32) if concrete
                            else sds((len(cu),), jnp.int32))
        epi = qc.epilogue(kernel, **fields)
        return jax_call(kernel), (a, b, c, epi, qc.scheduler(kernel, concrete and _gpu()), var)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        a, b, c, fields = operands(r, bf16(False), torch.float32)
        d = r.empty((rows, n), bf16(False))
        if kernel in _EPILOGUE_OUTPUT:
            fields[_EPILOGUE_OUTPUT[kernel]] = r.empty((rows, n), bf16(False))
        elif kernel == "gemm_symmetric":
            fields["mAuxOut"] = d.mT  # QuACK's PostAct = D.mT
        var = None
        if lengths:
            b = b.mT  # QuACK's varlen B: (L, N, K), the (L, K, N) weights' view
            var = qc.varlen(torch.tensor(_cumulative(lengths), dtype=torch.int32,
                                         device=r.device))
        epi = qc.epilogue(kernel, **fields)
        return torch_kernel(kernel), (a, b, d, c, epi,
                                      qc.scheduler(kernel, not r.meta and _gpu()), var)

    outputs = (2, 4) if kernel in _EPILOGUE_OUTPUT else (2,)
    return Case(name=_name(kernel, m, n, k), jax=jax_case,
                jax_reference=qc.jax_reference(kernel), torch=torch_case,
                torch_outputs=outputs, torch_reference=qc.torch_reference(kernel),
                authors_torch=qc.authors_torch(kernel))


def _cumulative(lengths) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def _gpu() -> bool:
    from cutecall import _core
    return _core.device_arch(0) is not None


def jax_args_from_torch(kernel: str, args) -> tuple:
    """The JAX call's arguments holding the values of the torch call's
    `args` (launcher order): the same inputs (B of varlen back in its
    (L, K, N) form), fresh buffers for the outputs, so both fronts and
    QuACK's path can be compared bit for bit."""
    import jax.numpy as jnp
    import torch

    def array(t):
        return jnp.from_dlpack(t.detach().contiguous()) if isinstance(t, torch.Tensor) else t
    a, b, _d, c, epi, sched, var = args
    if kernel == "gemm_varlen_m":
        b = b.mT
    fields = {f: array(getattr(epi, f)) for f in epi._fields
              if isinstance(getattr(epi, f), torch.Tensor)}
    if kernel == "gemm_symmetric":
        fields["mAuxOut"] = jnp.zeros(tuple(_d.shape), jnp.bfloat16)
    if var is not None:
        var = var._replace(mCuSeqlensM=array(var.mCuSeqlensM))
    return (array(a), array(b), array(c), epi._replace(**fields), sched, var)
