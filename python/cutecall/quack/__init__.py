"""QuACK's kernels (``quack-kernels``) as differentiable JAX functions, run
by cutecall: softmax, RMSNorm and cross-entropy, each a forward kernel paired
with QuACK's backward kernel through ``cutecall.differentiable``.

    from cutecall import quack
    y = quack.softmax(x)                          # (..., N)
    y = quack.rmsnorm(x, w, eps=1e-6)              # w: (N,) float32
    loss = quack.cross_entropy(logits, target)     # (...,) float32 per row
    jax.grad(lambda x, w: quack.rmsnorm(x, w).astype(jnp.float32).sum(),
             argnums=(0, 1))(x, w)

QuACK's kernel objects are built as QuACK's own ``_compile_*`` functions
build them; they take the row length N (and, for the RMSNorm backward, a
power-of-two bucket of the row count) as constructor arguments, so there is
one compile per N (per bucket), and the row count stays dynamic. Leading
dims are folded into rows. Every kernel declares ``batch_modes=0``, so
``jax.vmap`` folds into the rows.

Kernel objects are built per target (``cutecall.current_target()``, read
on every call: ``$CUTECALL_ARCH``, else the GPU, else sm_90a) under
``target.building()``, and the persistent RMSNorm backward's CTA count is
QuACK's per-arch count for the target device's SMs (132 on an H100 SXM,
148 on a B200). The GEMMs are :mod:`cutecall.quack.gemm` and the fused MLP
:mod:`cutecall.quack.mlp` (sm_90a and sm_100a/sm_103a; tiles per arch in
:mod:`cutecall.quack.tiles`). Requires ``quack-kernels`` (the ``external``
extra) and the CuTe DSL.
"""

from __future__ import annotations

import functools
import importlib

from cutecall import jax_to_cutlass_dtype

__all__ = ["softmax", "rmsnorm", "cross_entropy"]

IGNORE_INDEX = -100  # QuACK's (and PyTorch's) default
PACKAGES = ("quack-kernels",)  # the distribution QuACK's kernels are made of
# H100/H200 SXM's SM count. Kept for old imports: the RMSNorm backward's
# CTA count comes from the target's device.
HOPPER_SMS = 132


def softmax(x):
    """``softmax(x, axis=-1)``; x bfloat16, float16 or float32."""
    rows = x.reshape(-1, x.shape[-1])
    return _softmax(str(x.dtype), x.shape[-1], _arch())(rows).reshape(x.shape)


def rmsnorm(x, w, eps: float = 1e-6):
    """``x / sqrt(mean(x**2, -1) + eps) * w``; x (..., N) bfloat16, float16
    or float32, w (N,) float32 (QuACK keeps weights in float32)."""
    rows = x.reshape(-1, x.shape[-1])
    bucket = _mod("quack.rmsnorm")._bucket_T_hint(rows.shape[0])  # QuACK's key
    out = _rmsnorm(str(x.dtype), x.shape[-1], bucket, float(eps), _arch())(rows, w)
    return out.reshape(x.shape)


def cross_entropy(logits, target, ignore_index: int = IGNORE_INDEX):
    """Per-row ``logsumexp(logits) - logits[target]`` in float32 (0 where
    ``target == ignore_index``); logits (..., N), target (...) int32.
    Differentiable in ``logits``."""
    rows = logits.reshape(-1, logits.shape[-1])
    loss = _cross_entropy(str(logits.dtype), logits.shape[-1], int(ignore_index),
                          _arch())(rows, target.reshape(-1))
    return loss.reshape(logits.shape[:-1])


# ---------------------------------------------------------------------------

def _mod(name: str):
    return importlib.import_module(name)


def _arch() -> str:
    import cutecall
    return cutecall.current_target().arch


def _built(arch: str, make):
    """`make()`'s kernel object, built for `arch` (``target.building()``)."""
    import cutecall
    with cutecall.current_target(arch).building():
        return make()


def _like(x, dtype=None, shape=None):
    import jax
    return jax.ShapeDtypeStruct(x.shape if shape is None else shape,
                                x.dtype if dtype is None else dtype)


def _rows(*static):
    """TensorSpecs: N (dim 1) of the row arrays static, as QuACK compiles
    them (its kernels branch on N at trace time); ``True``: a whole (N,)
    weight; ``None``: default (dynamic)."""
    from cutecall import TensorSpec
    return tuple(None if s is None else TensorSpec(static=True if s is True else (False, True))
                 for s in static)


def _recipe_call(role: tuple, arch: str, module: str, make, **options):
    """The ``cutlass_call`` of the kernel object ``make(module, dtype)``
    builds (``module`` imported, the CuTe DSL dtype of ``role[1]``), under
    the recipe `role` for `arch`: built only when no store holds it, so a
    warm process imports neither QuACK nor the CuTe DSL."""
    import cutecall

    def build():
        return _built(arch, lambda: make(_mod(module), jax_to_cutlass_dtype(role[1])))
    return cutecall.cutlass_call(build, recipe=(role, arch), recipe_packages=PACKAGES,
                                 compile_options=f"--gpu-arch {arch}", **options)


@functools.lru_cache(maxsize=None)
def _softmax(dtype: str, n: int, arch: str):
    import cutecall
    fwd = _recipe_call(("softmax", dtype, n), arch, "quack.softmax",
                       lambda sm, cdt: sm.Softmax(cdt, n),
                       output_shape_dtype=lambda x: _like(x), batch_modes=0,
                       name=f"quack_softmax_{dtype}_{n}")
    bwd = _recipe_call(("softmax_bwd", dtype, n), arch, "quack.softmax",
                       lambda sm, cdt: sm.SoftmaxBackward(cdt, n),
                       output_shape_dtype=lambda dy, y: _like(dy), batch_modes=0,
                       name=f"quack_softmax_bwd_{dtype}_{n}")

    def forward(x):
        y = fwd(x)
        return y, y

    return cutecall.differentiable(fwd).defvjp(forward, lambda y, dy: (bwd(dy, y),))


def _sm_count(n: int, arch: str) -> int:
    """The RMSNorm backward's CTAs (dW partial rows): QuACK's ``get_sm_count``
    per arch for the target device's SM count."""
    import cutecall
    target = cutecall.current_target(arch)
    config = _mod("quack.rmsnorm_config")
    per_arch = (config._get_sm_count_blackwell if target.capability[0] >= 10
                else config._get_sm_count_hopper)
    return per_arch(n, target.device.sm_count)


@functools.lru_cache(maxsize=None)
def _rmsnorm(dtype: str, n: int, bucket: int, eps: float, arch: str):
    import jax.numpy as jnp
    import cutecall
    rms = _mod("quack.rmsnorm")
    cdt, options = jax_to_cutlass_dtype(dtype), f"--gpu-arch {arch}"
    fwd = cutecall.cutlass_call(
        _built(arch, lambda: rms.RMSNorm(cdt, n, is_layernorm=False)),
        input_spec=_rows("rows", True), output_spec=_rows("rows", None),
        # mO, mResO (absent), mRstd, mMean (absent)
        output_shape_dtype=lambda x, w, b, res, eps: (
            _like(x), None, _like(x, jnp.float32, x.shape[:-1]), None),
        batch_modes=0, compile_options=options, name=f"quack_rmsnorm_{dtype}_{n}")
    bwd = cutecall.cutlass_call(
        _built(arch, lambda: rms.RMSNormBackward(
            cdt, n, dout_dtype=cdt, T_hint=bucket, per_head=False, is_layernorm=False,
            weight_offset=0.0, num_acc=1)),
        input_spec=_rows("rows", True, "rows", None),
        output_spec=_rows("rows", "rows"),
        # mdX, mdW (float32 partials, one row per CTA), mdRes, mdB (absent)
        output_shape_dtype=lambda x, w, dout, dres, rstd, mean, sms: (
            _like(x), _like(w, jnp.float32, (sms, x.shape[1])), None, None),
        batch_modes="loop", compile_options=options, name=f"quack_rmsnorm_bwd_{dtype}_{n}")
    sms = _sm_count(n, arch)

    def primal(x, w):
        return fwd(x, w, None, None, eps)[0]

    def forward(x, w):
        out, _, rstd, _ = fwd(x, w, None, None, eps)
        return out, (x, w, rstd)

    def backward(res, dout):
        x, w, rstd = res
        dx, dw_partial, _, _ = bwd(x, w, dout, None, rstd, None, sms)
        return dx, dw_partial.sum(0).astype(w.dtype)

    return cutecall.differentiable(primal).defvjp(forward, backward)


@functools.lru_cache(maxsize=None)
def _cross_entropy(dtype: str, n: int, ignore_index: int, arch: str):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import cutecall
    stat = lambda x: _like(x, jnp.float32, x.shape[:1])  # noqa: E731
    fwd = _recipe_call(
        ("cross_entropy", dtype, n), arch, "quack.cross_entropy",
        lambda ce, cdt: ce.CrossEntropy(cdt, n, online_softmax=True),
        input_spec=_rows("rows", None), output_spec=_rows(None, None),
        output_shape_dtype=lambda x, t, tl, dx, wt, ii: (stat(x), stat(x)),
        output_params=("mLoss", "mLSE"), batch_modes=0,
        name=f"quack_cross_entropy_{dtype}_{n}")
    bwd = _recipe_call(
        ("cross_entropy_bwd", dtype, n), arch, "quack.cross_entropy",
        lambda ce, cdt: ce.CrossEntropyBackward(cdt, n),
        input_spec=_rows("rows", None, None, None), output_spec=_rows("rows"),
        output_shape_dtype=lambda x, t, dloss, lse, wt, ii: _like(x),
        output_params=("mdX",), batch_modes=0, name=f"quack_cross_entropy_bwd_{dtype}_{n}")

    def primal(x, target):
        return fwd(x, target, None, None, None, ignore_index)[0]

    def forward(x, target):
        loss, lse = fwd(x, target, None, None, None, ignore_index)
        return loss, (x, target, lse)

    def backward(res, dloss):
        x, target, lse = res
        dx = bwd(x, target, dloss, lse, None, ignore_index)
        return dx, np.zeros(target.shape, jax.dtypes.float0)

    return cutecall.differentiable(primal).defvjp(forward, backward)
