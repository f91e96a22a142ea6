"""The QuACK cases of :mod:`quack_corpus` beyond softmax (``quack_softmax``).

``quack.rmsnorm``: RMSNorm forward with ``None`` optionals, LayerNorm
forward (the same ``RMSNorm`` class with ``is_layernorm=True``) and the
persistent RMSNorm backward. Weights (and the LayerNorm bias) are float32,
as QuACK's ``layernorm_fwd`` requires and its modules keep them.

``quack.cross_entropy``: the forward (loss + lse, online softmax) and the
backward. Targets are int32 (JAX has no int64 without x64; QuACK takes
both); every 7th row is ``ignore_index``.
"""

from __future__ import annotations

from . import Case
from .quack_common import (EPS, IGNORE_INDEX, JaxRandom, TorchRandom, bf16,
                           cutlass_bf16, jax_kernel, like, mod, name, sds,
                           torch_kernel)

# RMSNorm backward is persistent: QuACK launches get_sm_count(N, device)
# CTAs and sums their (sm_count, N) float32 dw partials on the host. The
# case fixes the count QuACK picks on an H100/H200 (132 SMs).
HOPPER_SMS = 132


def build(kernel: str, m: int, n: int) -> Case:
    builders = {"rmsnorm_fwd": _rmsnorm_fwd, "layernorm_fwd": _layernorm_fwd,
                "rmsnorm_bwd": _rmsnorm_bwd,
                "cross_entropy_fwd": _cross_entropy_fwd,
                "cross_entropy_bwd": _cross_entropy_bwd}
    if kernel not in builders:
        raise ValueError(f"unknown QuACK kernel {kernel!r}")
    return builders[kernel](m, n)


# ---------------------------------------------------------------------------
# Forward: RMSNorm(dtype, N, is_layernorm)(mX, mW, mB, mRes, mO, mResO,
# mRstd, mMean, eps: Float32, stream)

def _norm_fwd(kernel: str, m: int, n: int, layernorm: bool) -> Case:
    def obj():
        return mod("quack.rmsnorm").RMSNorm(cutlass_bf16(), n,
                                            is_layernorm=layernorm)

    def outs(x, w, b, res, eps):
        import jax.numpy as jnp
        stat = sds(x.shape[:-1], jnp.float32)
        # mO, mResO (absent), mRstd, mMean (LayerNorm only)
        return (like(x), None, stat, stat if layernorm else None)

    call = jax_kernel(obj, outs)
    kern = torch_kernel(obj, outputs=4)

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        x = r.normal((m, n), bf16(), 2.0)
        w = r.normal((n,), jnp.float32)
        b = r.normal((n,), jnp.float32) if layernorm else None
        return call(), (x, w, b, None, EPS)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        x = r.normal((m, n), bf16(False), 2.0)
        w = r.normal((n,), torch.float32)
        b = r.normal((n,), torch.float32) if layernorm else None
        out = r.empty((m, n), bf16(False))
        rstd = r.empty((m,), torch.float32)
        mean = r.empty((m,), torch.float32) if layernorm else None
        return kern(), (x, w, b, None, out, None, rstd, mean, EPS)

    def jax_ref(x, w, b, res, eps):
        import jax.numpy as jnp
        x = x.astype(jnp.float32)
        mean = x.mean(-1) if layernorm else None
        xc = x - mean[:, None] if layernorm else x
        rstd = 1.0 / jnp.sqrt((xc * xc).mean(-1) + eps)
        out = xc * rstd[:, None] * w
        if b is not None:
            out = out + b
        return (out, None, rstd, mean)

    def torch_ref(x, w, b, res, out, res_out, rstd, mean, eps):
        x = x.float()
        mean = x.mean(-1) if layernorm else None
        xc = x - mean[:, None] if layernorm else x
        rstd = 1.0 / (xc.square().mean(-1) + eps).sqrt()
        o = xc * rstd[:, None] * w
        if b is not None:
            o = o + b
        return (o, rstd) + ((mean,) if layernorm else ())

    def authors_torch(x, w, b, res, out, res_out, rstd, mean, eps):
        # _rmsnorm_fwd(x, weight, out, bias, rstd, mean, residual,
        #              residual_out, eps, is_layernorm)
        mod("quack.rmsnorm")._rmsnorm_fwd(x, w, out, b, rstd, mean, res,
                                          res_out, eps, layernorm)

    outputs = (4, 6, 7) if layernorm else (4, 6)
    return Case(name(kernel, m, n), jax_case, jax_ref, torch_case, outputs,
                torch_ref, authors_torch, None)


def _rmsnorm_fwd(m, n):
    return _norm_fwd("rmsnorm_fwd", m, n, False)


def _layernorm_fwd(m, n):
    return _norm_fwd("layernorm_fwd", m, n, True)


# ---------------------------------------------------------------------------
# Backward: RMSNormBackward(dtype, N, dout_dtype=, T_hint=, per_head=,
# is_layernorm=, weight_offset=, num_acc=)(mX, mW, mdO, mdResO, mRstd, mMean,
# mdX, mdW, mdRes, mdB, sm_count: Int32, stream), built as QuACK's
# _compile_rmsnorm_bwd builds it for a weight and no bias/residual.

def _rmsnorm_bwd(m: int, n: int) -> Case:
    def obj():
        rms = mod("quack.rmsnorm")
        return rms.RMSNormBackward(
            cutlass_bf16(), n, dout_dtype=cutlass_bf16(),
            T_hint=rms._bucket_T_hint(m), per_head=False, is_layernorm=False,
            weight_offset=0.0, num_acc=1)

    def sm_count():
        return mod("quack.rmsnorm_config")._get_sm_count_hopper(n, HOPPER_SMS)

    def outs(x, w, dout, dres_out, rstd, mean, sms):
        import jax.numpy as jnp
        # mdX, mdW (fp32 partials, one row per CTA), mdRes, mdB (absent)
        return (like(x), sds((sms, x.shape[1]), jnp.float32), None, None)

    call = jax_kernel(obj, outs)
    kern = torch_kernel(obj, outputs=4)

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        x, dout = r.normal((m, n), bf16(), 2.0), r.normal((m, n), bf16())
        w = r.normal((n,), jnp.float32)
        if concrete:
            xf = x.astype(jnp.float32)
            rstd = 1.0 / jnp.sqrt((xf * xf).mean(-1) + EPS)
        else:
            rstd = sds((m,), jnp.float32)
        return call(), (x, w, dout, None, rstd, None, sm_count())

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        x, dout = r.normal((m, n), bf16(False), 2.0), r.normal((m, n), bf16(False))
        w = r.normal((n,), torch.float32)
        rstd = r.empty((m,), torch.float32) if r.meta else \
            (x.float().square().mean(-1) + EPS).rsqrt()
        sms = sm_count()
        dx = r.empty((m, n), bf16(False))
        dw_partial = r.empty((sms, n), torch.float32)
        return kern(), (x, w, dout, None, rstd, None, dx, dw_partial, None,
                        None, sms)

    def rows_per_cta():
        # Row blocks of num_threads // threads_per_row rows go round-robin
        # over the CTAs (the kernel's persistent loop).
        cfg = obj().config
        return cfg.num_threads // cfg.threads_per_row

    def partial_owner(mm, sms, np_mod):
        return (np_mod.arange(mm) // rows_per_cta()) % sms

    def jax_ref(x, w, dout, dres_out, rstd, mean, sms):
        import jax
        import jax.numpy as jnp
        xhat = x.astype(jnp.float32) * rstd[:, None]
        wdy = dout.astype(jnp.float32) * w
        c1 = (xhat * wdy).mean(-1, keepdims=True)
        dx = (wdy - xhat * c1) * rstd[:, None]
        dw = jax.ops.segment_sum(dout.astype(jnp.float32) * xhat,
                                 partial_owner(x.shape[0], sms, jnp),
                                 num_segments=sms)
        return (dx, dw, None, None)

    def torch_ref(x, w, dout, dres_out, rstd, mean, dx, dw_partial, dres, db,
                  sms):
        import torch
        xhat = x.float() * rstd[:, None]
        wdy = dout.float() * w
        c1 = (xhat * wdy).mean(-1, keepdim=True)
        dxr = (wdy - xhat * c1) * rstd[:, None]
        owner = partial_owner(x.shape[0], sms, torch).to(x.device)
        dw = torch.zeros((sms, x.shape[1]), device=x.device)
        dw.index_add_(0, owner, dout.float() * xhat)
        return (dxr, dw)

    def authors_torch(x, w, dout, dres_out, rstd, mean, dx, dw_partial, dres,
                      db, sms):
        # _rmsnorm_bwd(x, weight, dout, rstd, dx, dw_partial, db_partial,
        #              dresidual_out, dresidual, sm_count, mean, is_layernorm)
        mod("quack.rmsnorm")._rmsnorm_bwd(x, w, dout, rstd, dx, dw_partial, db,
                                          dres_out, dres, sms, mean, False)

    return Case(name("rmsnorm_bwd", m, n), jax_case, jax_ref, torch_case,
                (6, 7), torch_ref, authors_torch, None)


# ---------------------------------------------------------------------------
# Cross entropy

def _targets_jax(r: JaxRandom, m: int, n: int):
    import jax.numpy as jnp
    t = r.randint((m,), jnp.int32, n)
    if r.concrete:
        t = jnp.where(jnp.arange(m) % 7 == 3, IGNORE_INDEX, t)
    return t


def _targets_torch(r: TorchRandom, m: int, n: int):
    import torch
    t = r.randint((m,), torch.int32, n)
    if not r.meta:
        t[3::7] = IGNORE_INDEX
    return t


def _lse_jax(x):
    import jax
    return jax.nn.logsumexp(x.astype("float32"), axis=-1)


def _target_logit_jax(x, t):
    import jax.numpy as jnp
    safe = jnp.clip(t, 0, x.shape[1] - 1)
    return jnp.take_along_axis(x.astype(jnp.float32), safe[:, None], 1)[:, 0]


def _cross_entropy_fwd(m: int, n: int) -> Case:
    # QuACK: CrossEntropy(dtype, N, online_softmax=not has_dx); no dx here.
    def obj():
        return mod("quack.cross_entropy").CrossEntropy(cutlass_bf16(), n,
                                                       online_softmax=True)

    def outs(x, target, target_logit, dx, weight, ignore_index):
        import jax.numpy as jnp
        loss = sds((x.shape[0],), jnp.float32)
        return (loss, loss)

    # The outputs mLoss and mLSE sit between inputs: name them.
    call = jax_kernel(obj, outs, output_params=("mLoss", "mLSE"))
    # mWeight, an input, follows the outputs: name them.
    kern = torch_kernel(obj, outputs=("mLoss", "mLSE", "mdX"))

    def jax_case(concrete, seed):
        r = JaxRandom(concrete, seed)
        x = r.normal((m, n), bf16(), 2.0)
        return call(), (x, _targets_jax(r, m, n), None, None, None,
                        IGNORE_INDEX)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        x = r.normal((m, n), bf16(False), 2.0)
        t = _targets_torch(r, m, n)
        loss, lse = r.empty((m,), torch.float32), r.empty((m,), torch.float32)
        return kern(), (x, t, None, loss, lse, None, None, IGNORE_INDEX)

    def jax_ref(x, target, target_logit, dx, weight, ignore_index):
        import jax.numpy as jnp
        lse = _lse_jax(x)
        loss = jnp.where(target == ignore_index, 0.0,
                         lse - _target_logit_jax(x, target))
        return (loss, lse)

    def torch_ref(x, target, target_logit, loss, lse, dx, weight, ignore_index):
        import torch
        xf = x.float()
        lse = torch.logsumexp(xf, dim=-1)
        ignored = target == ignore_index
        tl = xf.gather(1, target.long().clamp(0, x.shape[1] - 1)[:, None])[:, 0]
        return (torch.where(ignored, 0.0, lse - tl), lse)

    def authors_torch(x, target, target_logit, loss, lse, dx, weight, ignore_index):
        mod("quack.cross_entropy").cross_entropy_fwd_out(
            x, target, target_logit, loss, lse, dx, weight, ignore_index)

    # float32 loss and lse.
    return Case(name("cross_entropy_fwd", m, n), jax_case, jax_ref, torch_case,
                (3, 4), torch_ref, authors_torch, None, atol=1e-3, rtol=1e-3)


def _cross_entropy_bwd(m: int, n: int) -> Case:
    def obj():
        return mod("quack.cross_entropy").CrossEntropyBackward(cutlass_bf16(), n)

    # The output mdX sits between inputs (mDLoss, mLSE): name it.
    call = jax_kernel(obj, lambda x, target, dloss, lse, weight, ii: like(x),
                      output_params=("mdX",))
    kern = torch_kernel(obj, outputs=("mdX",))

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        x = r.normal((m, n), bf16(), 2.0)
        t = _targets_jax(r, m, n)
        dloss = r.normal((m,), jnp.float32)
        lse = _lse_jax(x) if concrete else sds((m,), jnp.float32)
        return call(), (x, t, dloss, lse, None, IGNORE_INDEX)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        x = r.normal((m, n), bf16(False), 2.0)
        t = _targets_torch(r, m, n)
        dloss = r.normal((m,), torch.float32)
        lse = r.empty((m,), torch.float32) if r.meta else \
            torch.logsumexp(x.float(), dim=-1)
        dx = r.empty((m, n), bf16(False))
        return kern(), (x, t, dloss, dx, lse, None, IGNORE_INDEX)

    def jax_ref(x, target, dloss, lse, weight, ignore_index):
        import jax
        import jax.numpy as jnp
        p = jnp.exp(x.astype(jnp.float32) - lse[:, None])
        onehot = jax.nn.one_hot(target, x.shape[1], dtype=jnp.float32)
        scale = jnp.where(target == ignore_index, 0.0, dloss)
        return (p - onehot) * scale[:, None]

    def torch_ref(x, target, dloss, dx, lse, weight, ignore_index):
        import torch
        p = torch.exp(x.float() - lse[:, None])
        ignored = target == ignore_index
        onehot = torch.zeros_like(p)
        rows = torch.nonzero(~ignored)[:, 0]
        onehot[rows, target[rows].long()] = 1.0
        scale = torch.where(ignored, 0.0, dloss)
        return ((p - onehot) * scale[:, None],)

    def authors_torch(x, target, dloss, dx, lse, weight, ignore_index):
        mod("quack.cross_entropy").cross_entropy_bwd_out(
            x, target, dloss, lse, dx, weight, ignore_index)

    return Case(name("cross_entropy_bwd", m, n), jax_case, jax_ref, torch_case,
                (3,), torch_ref, authors_torch, None, atol=1e-4, rtol=2e-2)
