"""QuACK's epilogue GEMMs as QuACK builds and launches them: kernel objects
and argument containers captured from QuACK's public torch entry points,
QuACK's own paths for comparison, float32 references.

:func:`captured` calls one of ``quack.gemm_interface``'s functions
(``gemm_add``, ``gemm_act``, ``gemm_dact``, ``gemm_symmetric``, ``gemm``
with ``cu_seqlens_m``) on small meta tensors with QuACK's compile function
undecorated (``_compile_gemm``, ``_compile_gemm_epi``,
``_compile_gemm_symmetric``: its ``@jit_cache`` bypassed) and stops it at
``cute.compile`` (``authors.compile_args``): the kernel object and the
argument containers are what QuACK's host code derives for sm90 from those
tensors, with its untuned configuration -- the one :func:`authors_torch`
asks for, so both paths run the same kernel. Nothing is compiled.

The launch containers follow QuACK's ``run_*_plan``: its
``EpilogueArguments`` with the call's tensors and scalars in place of the
fakes and the compile-time fields (``add_to_output``, ``rounding_mode``) at
their compile values (QuACK passes None for them: TVM-FFI drops constexpr
fields, cutecall keys on them), and ``make_scheduler_args``'s
``TileSchedulerOptions`` (``max_active_clusters`` from QuACK's
``get_max_active_clusters`` on a GPU, an H100's 66 two-CTA clusters
without one; ``raster_order`` at its compile value).

Imports QuACK, torch and JAX when called, never at import.
"""

from __future__ import annotations

import contextlib
import functools
import os

from . import authors

ACTIVATION = "gelu_tanh_approx"
HOPPER_SMS = 132  # H100/H200 SXM
SM90 = (9, 0)

# QuACK's compile function for each kernel: (module, function name).
_COMPILERS = {
    "gemm_add": ("quack.gemm", "_compile_gemm"),
    "gemm_varlen_m": ("quack.gemm", "_compile_gemm"),
    "gemm_act": ("quack.gemm_runtime.host", "_compile_gemm_epi"),
    "gemm_dact": ("quack.gemm_runtime.host", "_compile_gemm_epi"),
    "gemm_symmetric": ("quack.gemm_symmetric", "_compile_gemm_symmetric"),
}


@functools.lru_cache(maxsize=None)
def captured(kernel: str) -> authors.Captured:
    """What QuACK's public entry point for `kernel` (a ``_COMPILERS`` key)
    hands to ``cute.compile`` on sm90: ``Captured(kernel, args, kwargs)``,
    args = (mA, mB, mD, mC, epilogue_args, scheduler_args, varlen_args,
    stream, mSFA, mSFB). Without a GPU, ``QUACK_ARCH`` is set to sm_90
    meanwhile (QuACK's cross-compile setting)."""
    import torch
    from quack import gemm_interface as gi

    def meta(*shape, dtype=torch.bfloat16):
        return torch.empty(shape, dtype=dtype, device="meta")
    m, n, k, batches = 264, 248, 136, 2  # any shape: the config is QuACK's default
    a, b = meta(m, k), meta(k, n)
    calls = {
        "gemm_add": lambda: gi.gemm_add(a, b, meta(m, n), out=meta(m, n),
                                        bias=meta(1, n, dtype=torch.float32),
                                        alpha=0.5, beta=2.0, tuned=False),
        "gemm_act": lambda: gi.gemm_act(a, b, bias=meta(n, dtype=torch.float32),
                                        activation=ACTIVATION, preact_out=meta(m, n),
                                        postact_out=meta(m, n), tuned=False),
        "gemm_dact": lambda: gi.gemm_dact(a, b, meta(m, n), activation=ACTIVATION,
                                          dx_out=meta(m, n), postact_out=meta(m, n),
                                          tuned=False, dynamic_scheduler=False),
        "gemm_symmetric": lambda: gi.gemm_symmetric(a, a.mT, out=meta(m, m), alpha=0.5),
        "gemm_varlen_m": lambda: gi.gemm(a, meta(batches, k, n), out=meta(m, n),
                                         cu_seqlens_m=meta(batches + 1, dtype=torch.int32),
                                         tuned=False),
    }
    return quack_compile_args(kernel, calls[kernel])


def quack_compile_args(kernel: str, fn, *args, **kwargs) -> authors.Captured:
    """``authors.compile_args(fn, *args, **kwargs)`` with QuACK's compile
    function for `kernel` undecorated, on sm90: what a QuACK path `fn`
    (e.g. :func:`authors_torch` on meta tensors) would compile."""
    module, name = _COMPILERS[kernel]
    with _sm90(), _uncached(module, name):
        return authors.compile_args(fn, *args, **kwargs)


@contextlib.contextmanager
def _sm90():
    """QuACK reads the arch of meta tensors from ``QUACK_ARCH`` (its
    cross-compile setting) and the DSL's from its own setting: sm90 both."""
    from cutecall._driver.dsl import dsl_arch
    unset = "QUACK_ARCH" not in os.environ
    if unset:
        os.environ["QUACK_ARCH"] = "sm_90"
    try:
        with dsl_arch("sm_90a"):
            yield
    finally:
        if unset:
            os.environ.pop("QUACK_ARCH", None)


@contextlib.contextmanager
def _uncached(module: str, name: str):
    """QuACK's ``@jit_cache``'d compile function replaced by the function it
    wraps, so a kernel QuACK already compiled in this process is captured
    too."""
    import importlib
    mod = importlib.import_module(module)
    cached = getattr(mod, name)
    setattr(mod, name, cached.__wrapped__)
    try:
        yield
    finally:
        setattr(mod, name, cached)


def kernel_object(kernel: str):
    """QuACK's kernel object for `kernel`, configured as QuACK configures it."""
    return captured(kernel).kernel


def epilogue(kernel: str, **fields):
    """QuACK's ``EpilogueArguments`` for `kernel` holding `fields` (arrays
    or tensors, scalars); other fields as compiled (None, or their
    compile-time values)."""
    return captured(kernel).args[4]._replace(**fields)


def scheduler(kernel: str, on_gpu: bool):
    """QuACK's launch-time ``TileSchedulerOptions`` (``make_scheduler_args``)."""
    from quack.gemm_tvm_ffi_utils import make_scheduler_args
    obj = kernel_object(kernel)
    size = obj.cluster_shape_mnk[0] * obj.cluster_shape_mnk[1]
    if on_gpu:
        from quack.cute_dsl_utils import get_max_active_clusters
        clusters = get_max_active_clusters(size, SM90)
    else:
        clusters = HOPPER_SMS // size
    fake = captured(kernel).args[5]
    return make_scheduler_args(clusters, 8, None)._replace(raster_order=fake.raster_order)


def varlen(cu_seqlens):
    """QuACK's ``VarlenArguments(mCuSeqlensM=cu_seqlens)``."""
    return captured("gemm_varlen_m").args[6]._replace(mCuSeqlensM=cu_seqlens)


# ---------------------------------------------------------------------------
# QuACK's own torch paths, on a case's launcher-order arguments
# (mA, mB, mD, mC, epilogue_args, scheduler_args, varlen_args)

def authors_torch(kernel: str):
    """``f(*args)``: QuACK's public entry point for `kernel` writing the
    case's outputs, untuned: the configuration of :func:`captured`."""
    def run(a, b, d, c, epi, sched, var):
        from quack import gemm_interface as gi
        if kernel == "gemm_add":   # B crosses as (K, N): b is the (K, N) operand
            gi.gemm_add(a, b, c, out=d, bias=epi.mRowVecBroadcast, alpha=epi.alpha,
                        beta=epi.beta, tuned=False)
        elif kernel == "gemm_act":
            gi.gemm_act(a, b, bias=epi.mRowVecBroadcast, activation=ACTIVATION,
                        preact_out=d, postact_out=epi.mAuxOut, tuned=False)
        elif kernel == "gemm_dact":  # QuACK's default is the dynamic scheduler
            gi.gemm_dact(a, b, c, activation=ACTIVATION, dx_out=d,
                         postact_out=epi.mAuxOut, tuned=False, dynamic_scheduler=False)
        elif kernel == "gemm_symmetric":  # QuACK's B is (K, M) = A.mT
            gi.gemm_symmetric(a, b.mT, out=d, alpha=epi.alpha)
        else:  # varlen_m: QuACK's B is (L, K, N); the kernel's, its .mT view
            gi.gemm(a, b.mT, out=d, cu_seqlens_m=var.mCuSeqlensM, tuned=False)
    run.__name__ = run.__qualname__ = f"quack_{kernel}"
    return run


# ---------------------------------------------------------------------------
# References (float32)

def jax_reference(kernel: str):
    """``f(*jax_args) -> outputs`` of the JAX call, in float32."""
    def run(a, b, c, epi, sched, var):
        import jax
        import jax.numpy as jnp
        f32 = jnp.float32
        hi = jax.lax.Precision.HIGHEST
        a = a.astype(f32)
        if kernel == "gemm_varlen_m":
            sizes = jnp.diff(var.mCuSeqlensM).astype(jnp.int32)
            return jax.lax.ragged_dot(a, b.astype(f32), sizes, precision=hi)
        if kernel == "gemm_symmetric":
            return epi.alpha * jnp.matmul(a, a.T, precision=hi)
        acc = jnp.matmul(a, b.astype(f32), precision=hi)
        if kernel == "gemm_add":
            return epi.alpha * acc + epi.beta * c.astype(f32) + epi.mRowVecBroadcast
        if kernel == "gemm_act":
            x = acc + epi.mRowVecBroadcast
            return x, jax.nn.gelu(x, approximate=True)
        x = c.astype(f32)  # gemm_dact: c is the preact, acc the upstream grad
        y, vjp = jax.vjp(lambda t: jax.nn.gelu(t, approximate=True), x)
        return vjp(acc)[0], y
    return run


def torch_reference(kernel: str):
    """``f(*torch_args)``: the expected values of the case's torch outputs
    (D, and for an epilogue output ``{"mAuxOut": value}``), in float32."""
    def run(a, b, d, c, epi, sched, var):
        import torch
        import torch.nn.functional as F
        a = a.float()
        if kernel == "gemm_varlen_m":
            cu = var.mCuSeqlensM.tolist()
            return (torch.cat([a[s:e] @ b[i].float().T
                               for i, (s, e) in enumerate(zip(cu, cu[1:]))]),)
        if kernel == "gemm_symmetric":
            return (epi.alpha * (a @ a.T),)
        acc = a @ b.float()
        if kernel == "gemm_add":
            return (epi.alpha * acc + epi.beta * c.float() + epi.mRowVecBroadcast,)
        if kernel == "gemm_act":
            x = acc + epi.mRowVecBroadcast
            return x, {"mAuxOut": F.gelu(x, approximate="tanh")}
        x = c.float().requires_grad_(True)
        y = F.gelu(x, approximate="tanh")
        (dx,) = torch.autograd.grad(y, x, acc)
        return dx, {"mAuxOut": y.detach()}
    return run
