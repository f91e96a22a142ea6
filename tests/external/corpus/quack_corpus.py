"""QuACK (``quack-kernels``) kernels, called the way QuACK calls them.

Each case builds QuACK's own kernel object -- ``Softmax(dtype, N)``,
``RMSNorm(dtype, N, is_layernorm=...)``, ``CrossEntropy(dtype, N)``... --
exactly as QuACK's ``compile`` functions do, and hands it to cutecall with
default specs: ``cutecall.cutlass_call(obj, output_shape_dtype=...)`` for
JAX, ``cutecall.torch.kernel(obj, outputs=...)`` for torch. The arguments
follow the launcher's parameter order (``Optional`` tensors as ``None``,
runtime scalars such as ``eps`` as Python numbers); outputs sit after the
inputs (an output parameter given ``None`` in ``output_shape_dtype``
receives ``None``). The torch calls pass every parameter, outputs
preallocated, in launcher order; ``outputs=`` counts the launcher's last
tensor parameters, or names them where an input follows (cross-entropy). The authors' paths are
QuACK's torch entry points (``quack.softmax._softmax_fwd``,
``quack.rmsnorm._rmsnorm_fwd``, ...) and, for softmax, QuACK's JAX path
(``quack.softmax_jax``, which needs ``jax-tvm-ffi``).

The cases (launcher signature, what the call passes):

=====================  =====================================================
softmax_fwd            ``Softmax(bf16, N)(mX, mO)``: ``call(x)``
softmax_bwd            ``SoftmaxBackward(bf16, N)(mdY, mY, mdX)``: ``call(dy, y)``
rmsnorm_fwd            ``RMSNorm(bf16, N)(mX, mW, mB, mRes, mO, mResO, mRstd,
                       mMean, eps)``: ``call(x, w, None, None, eps)``, outputs
                       ``(out, None, rstd, None)``
layernorm_fwd          ``RMSNorm(bf16, N, is_layernorm=True)``: ``call(x, w, b,
                       None, eps)``, outputs ``(out, None, rstd, mean)``
rmsnorm_bwd            ``RMSNormBackward(bf16, N, ...)(mX, mW, mdO, mdResO,
                       mRstd, mMean, mdX, mdW, mdRes, mdB, sm_count)``:
                       ``call(x, w, dout, None, rstd, None, sm_count)``,
                       outputs ``(dx, dw_partial, None, None)``
cross_entropy_fwd      ``CrossEntropy(bf16, N)(mX, mTarget, mTargetLogit,
                       mLoss, mLSE, mdX, mWeight, ignore_index)``:
                       ``call(x, target, None, ignore_index)``, outputs
                       ``(loss, lse, None, None)`` -- mWeight follows the
                       outputs, so it is bound as a fourth output slot that
                       receives ``None`` (no class weights)
cross_entropy_bwd      ``CrossEntropyBackward(bf16, N)(mX, mTarget, mDLoss,
                       mdX, mLSE, mWeight, ignore_index)``: mdX sits between
                       inputs, so ``call(x, target, dloss, dx, lse, None,
                       ignore_index)`` passes a dx buffer aliased to the
                       output (``input_output_aliases={3: 0}``)
=====================  =====================================================

Sizes: ``"bench"`` is M=16384, N=4096 bf16 for every kernel; ``"test"`` is
N=1024 with M=1000 or 1001 (not multiples of 16).
"""

from __future__ import annotations

from . import Case, quack_corpus_kernels, quack_softmax
from .quack_common import EPS, IGNORE_INDEX, bf16

__all__ = ["KERNELS", "SHAPES", "cases", "case", "EPS", "IGNORE_INDEX", "bf16"]

KERNELS = ("softmax_fwd", "softmax_bwd", "rmsnorm_fwd", "layernorm_fwd",
           "rmsnorm_bwd", "cross_entropy_fwd", "cross_entropy_bwd")

# (M, N) per kernel and size.
SHAPES = {
    "bench": {k: (16384, 4096) for k in KERNELS},
    "test": {"softmax_fwd": (1000, 1024), "softmax_bwd": (1000, 1024),
             "rmsnorm_fwd": (1001, 1024), "layernorm_fwd": (1000, 1024),
             "rmsnorm_bwd": (1000, 1024), "cross_entropy_fwd": (1001, 1024),
             "cross_entropy_bwd": (1000, 1024)},
}



def cases(size: str) -> list[Case]:
    """The QuACK cases at ``size`` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(k, *SHAPES[size][k]) for k in KERNELS]


def case(kernel: str, m: int, n: int) -> Case:
    """One QuACK kernel (a ``KERNELS`` entry) at (M, N), bf16."""
    if kernel in quack_softmax.BUILDERS:
        return quack_softmax.BUILDERS[kernel](m, n)
    return quack_corpus_kernels.build(kernel, m, n)
