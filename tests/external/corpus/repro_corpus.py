"""Cases that reproduce where cutecall lost to kernels' authors on the H200
(b655c6b), each with the authors' own compile beside cutecall's two fronts.

==============  ============================================================
layernorm_simt  our :class:`~repro_kernels.LayerNormSimt`, bf16 (M, N):
                ``call(x, w, b, eps)``; its authors compile per shape
                (``from_dlpack`` with no dynamic marks: every extent and
                stride static, 16-byte alignment)
gate_vec8       our :class:`~repro_kernels.GateVec`, f16 ``(n / 8, 8)``
                views: ``call(x, g)``; authors as above
topk            QuACK's ``TopK(bf16, N, k)``: ``call(x)`` -> (values,
                indices); authors: QuACK's ``_topk_fwd`` (``TopK.compile``:
                M dynamic, N static, strides dynamic of class 8)
hadamard640     QuACK's ``HadamardTransform(bf16, 640)``, N padded to 1024
                inside: ``call(x, scale, 0)``; authors: QuACK's
                ``_hadamard_transform_fwd`` (``quack_hadamard_corpus``)
==============  ============================================================

Each :class:`Repro` holds the corpus :class:`Case` (cutecall's default specs,
the references, the authors' torch path) and what ``bench/external``'s part
``losses`` times beside it: the same call compiled with every extent static
(``use_static_tensors=True`` in JAX, ``static=True`` in torch), and the
authors' compile itself (``authors(device)``: the compiled function; on
``"meta"`` compiled from fake tensors of the same types, without a GPU), so
``bench/external/device_code.py`` can compare the device code of every path.

Sizes: ``"test"`` small odd shapes (CPU compiles, GPU numerics),
``"bench"`` the sizes that lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable

from . import Case, quack_hadamard_corpus
from .quack_common import JaxRandom, TorchRandom, like, mod, sds

__all__ = ["KERNELS", "SHAPES", "Repro", "repros", "cases"]

KERNELS = ("layernorm_simt", "gate_vec8", "topk", "hadamard640")
EPS = 1e-5
SHAPES = {
    "test": {"layernorm_simt": (1000, 1024), "gate_vec8": (8 * 4099,),
             "topk": (1000, 512, 8), "hadamard640": (1000, 640)},
    "bench": {"layernorm_simt": (16384, 4096), "gate_vec8": (1 << 25,),
              "topk": (4096, 1024, 16), "hadamard640": (4096, 640)},
}


@dataclasses.dataclass(frozen=True)
class Repro:
    """A :class:`Case` with its static-extent variants and the authors'
    compile (module docstring)."""

    case: Case
    jax_static: Callable[[bool, int], tuple[Any, tuple]]
    torch_static: Callable[[str, int], tuple[Any, tuple]]
    authors: Callable[[str], Any]
    authors_compiles: str  # what the authors compile in, in words
    jax_args_from_torch: Callable[[tuple], tuple]  # the torch call's inputs, for JAX


def repros(size: str) -> list[Repro]:
    """Every case at `size` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    build = {"layernorm_simt": _layernorm, "gate_vec8": _gate, "topk": _topk,
             "hadamard640": _hadamard}
    return [build[k](*SHAPES[size][k]) for k in KERNELS]


def cases(size: str) -> list[Case]:
    """The corpus cases (``Case``) of :func:`repros`."""
    return [r.case for r in repros(size)]


def _kernels():
    from . import repro_kernels
    return repro_kernels


def _to_jax(*tensors):
    import jax.numpy as jnp
    return tuple(jnp.from_dlpack(t.detach().clone().contiguous()) for t in tensors)


# ---------------------------------------------------------------------------
# The authors' compile of our own kernels: static layouts, as from_dlpack
# gives a contiguous tensor with no dynamic marks (assumed_align=16), and
# QuACK's launch convention (TVM-FFI, the env stream).

def _static_fake(dtype, shape):
    import cutlass.cute as cute
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.insert(0, acc)
        acc *= extent
    return cute.runtime.make_fake_tensor(dtype, tuple(shape), stride=tuple(strides),
                                         assumed_align=16)


def _building():
    """The target's ``building()`` (device queries answer for the target);
    nothing on a cutecall older than targets: the old side of an A/B run,
    which runs this checkout's benchmarks against an older build."""
    import cutecall
    target = getattr(cutecall, "current_target", None)
    return target().building() if target else contextlib.nullcontext()


@functools.lru_cache(maxsize=None)
def _authors_static(build: Callable, shapes: tuple, scalars: tuple):
    """``cute.compile`` of ``build()`` for tensors of exactly `shapes`
    ((cutlass dtype name, shape) pairs) and runtime `scalars` (DSL type
    names): once per shape, as the authors' per-shape cache keeps it."""
    import cutlass
    import cutlass.cute as cute

    args = [_static_fake(getattr(cutlass, d), s) for d, s in shapes]
    args += [getattr(cutlass, t)(0) for t in scalars]
    args.append(cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=True))
    with _building():
        return cute.compile(build(), *args, options="--enable-tvm-ffi")


def _torch_static(build, outputs):
    """A ``cutecall.torch.kernel(build(), static=True)`` per case."""
    @functools.lru_cache(maxsize=None)
    def get():
        import cutecall.torch
        return cutecall.torch.kernel(build(), outputs=outputs, static=True)
    return get


def _jax_calls(build, out, **kw):
    """(default-spec call, every-extent-static call) getters."""
    @functools.lru_cache(maxsize=None)
    def get(static: bool):
        import cutecall
        return cutecall.cutlass_call(build(), output_shape_dtype=out,
                                     use_static_tensors=static, **kw)
    return get


# ---------------------------------------------------------------------------
# layernorm_simt

def _layernorm(m: int, n: int) -> Repro:
    obj = functools.lru_cache(maxsize=None)(lambda: _kernels().LayerNormSimt())
    calls = _jax_calls(obj, lambda x, w, b, eps: like(x))

    @functools.lru_cache(maxsize=None)
    def kern():
        import cutecall.torch
        return cutecall.torch.kernel(obj())
    kern_static = _torch_static(obj, 1)

    def jax_args(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        return (r.normal((m, n), jnp.bfloat16), r.normal((n,), jnp.bfloat16),
                r.normal((n,), jnp.bfloat16), EPS)

    def torch_args(device, seed):
        import torch
        r = TorchRandom(device, seed)
        return (r.normal((m, n), torch.bfloat16), r.normal((n,), torch.bfloat16),
                r.normal((n,), torch.bfloat16), r.empty((m, n), torch.bfloat16), EPS)

    def jax_ref(x, w, b, eps):
        import jax.numpy as jnp
        xf = x.astype(jnp.float32)
        mean = xf.mean(-1, keepdims=True)
        var = ((xf - mean) ** 2).mean(-1, keepdims=True)
        y = (xf - mean) / jnp.sqrt(var + eps) * w.astype(jnp.float32) + b.astype(jnp.float32)
        return y.astype(x.dtype)

    def torch_ref(x, w, b, out, eps):
        import torch
        return (torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), eps),)

    shapes = (("BFloat16", (m, n)), ("BFloat16", (n,)), ("BFloat16", (n,)),
              ("BFloat16", (m, n)))

    def authors(device):
        return _authors_static(obj, shapes, ("Float32",))

    def authors_torch(x, w, b, out, eps):
        authors("cuda")(x, w, b, out, eps)

    case = Case(f"repro.layernorm_simt[bf16 {m}x{n}]",
                lambda c, s: (calls(False), jax_args(c, s)), jax_ref,
                lambda d, s: (kern(), torch_args(d, s)), (3,), torch_ref, authors_torch,
                atol=5e-2, rtol=2e-2)
    return Repro(case, lambda c, s: (calls(True), jax_args(c, s)),
                 lambda d, s: (kern_static(), torch_args(d, s)), authors,
                 "every extent and stride static, 16-byte alignment",
                 lambda a: _to_jax(*a[:3]) + (a[4],))


# ---------------------------------------------------------------------------
# gate_vec8: (n / 8, 8) f16 views

def _gate(n: int) -> Repro:
    rows, k = n // 8, 8
    obj = functools.lru_cache(maxsize=None)(lambda: _kernels().GateVec())
    calls = _jax_calls(obj, lambda x, g: like(x))

    @functools.lru_cache(maxsize=None)
    def kern():
        import cutecall.torch
        return cutecall.torch.kernel(obj())
    kern_static = _torch_static(obj, 1)

    def jax_args(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        return tuple(r.normal((n,), jnp.float16).reshape(rows, k) if concrete
                     else sds((rows, k), jnp.float16) for _ in range(2))

    def torch_args(device, seed):
        import torch
        r = TorchRandom(device, seed)
        x, g = (r.normal((n,), torch.float16).view(rows, k) for _ in range(2))
        return x, g, r.empty((n,), torch.float16).view(rows, k)

    def jax_ref(x, g):
        import jax
        return (x.astype("float32") * jax.nn.sigmoid(g.astype("float32"))).astype(x.dtype)

    def torch_ref(x, g, out):
        return (x.float() * g.float().sigmoid(),)

    shapes = tuple(("Float16", (rows, k)) for _ in range(3))

    def authors(device):
        return _authors_static(obj, shapes, ())

    def authors_torch(x, g, out):
        authors("cuda")(x, g, out)

    case = Case(f"repro.gate_vec8[f16 ({rows}, {k})]",
                lambda c, s: (calls(False), jax_args(c, s)), jax_ref,
                lambda d, s: (kern(), torch_args(d, s)), (2,), torch_ref, authors_torch,
                atol=1e-2, rtol=1e-2)
    return Repro(case, lambda c, s: (calls(True), jax_args(c, s)),
                 lambda d, s: (kern_static(), torch_args(d, s)), authors,
                 "every extent and stride static, 16-byte alignment",
                 lambda a: _to_jax(*a[:2]))


# ---------------------------------------------------------------------------
# QuACK's TopK(bf16, N, k) and HadamardTransform(bf16, 640)

def _topk(m: int, n: int, k: int) -> Repro:
    def obj():
        import cutlass
        return mod("quack.topk").TopK(cutlass.BFloat16, n, k)
    obj = functools.lru_cache(maxsize=None)(obj)

    def outs(x):
        import jax.numpy as jnp
        return (sds((m, k), x.dtype), sds((m, k), jnp.int32))
    calls = _jax_calls(obj, outs)

    @functools.lru_cache(maxsize=None)
    def kern():
        import cutecall.torch
        return cutecall.torch.kernel(obj(), outputs=2)
    kern_static = _torch_static(obj, 2)

    def jax_args(concrete, seed):
        import jax.numpy as jnp
        return (JaxRandom(concrete, seed).normal((m, n), jnp.bfloat16),)

    def torch_args(device, seed):
        import torch
        r = TorchRandom(device, seed)
        if r.meta or n > 512:
            x = r.normal((m, n), torch.bfloat16)
        else:  # distinct values per row, exact in bf16: no ties to order
            x = (torch.rand((m, n), generator=r.gen, device=r.device).argsort(-1)
                 - n // 2).to(torch.bfloat16) / 64
        return x, r.empty((m, k), torch.bfloat16), r.empty((m, k), torch.int32)

    def jax_ref(x):
        import jax
        values, indices = jax.lax.top_k(x, k)
        return values, indices.astype("int32")

    def torch_ref(x, values, indices):
        v, i = x.float().topk(k, dim=-1)
        return v, i.int()

    def authors(device):
        import cutlass
        import cutlass.cute as cute

        from cutecall._driver.dsl import compile_args
        if device != "meta":
            return mod("quack.topk").TopK.compile(cutlass.BFloat16, n, k, False)
        cap = compile_args(mod("quack.topk").TopK.compile.__wrapped__,
                           cutlass.BFloat16, n, k, False)
        with _building():
            return cute.compile(cap.kernel, *cap.args, **cap.kwargs)

    def authors_torch(x, values, indices):
        mod("quack.topk")._topk_fwd(x, k, False, values, indices)

    case = Case(f"repro.topk[bf16 {m}x{n} k={k}]",
                lambda c, s: (calls(False), jax_args(c, s)), jax_ref,
                lambda d, s: (kern(), torch_args(d, s)), (1, 2), torch_ref,
                authors_torch, atol=2e-2, rtol=2e-2)
    return Repro(case, lambda c, s: (calls(True), jax_args(c, s)),
                 lambda d, s: (kern_static(), torch_args(d, s)), authors,
                 "N static, M dynamic, strides dynamic (class 8), 16-byte alignment",
                 lambda a: _to_jax(a[0]))


def _hadamard(m: int, n: int) -> Repro:
    base = quack_hadamard_corpus.case(m, n)

    @functools.lru_cache(maxsize=None)
    def objs():
        import cutlass

        import cutecall
        import cutecall.torch
        obj = mod(quack_hadamard_corpus.HADAMARD).HadamardTransform(
            cutlass.BFloat16, n, persistent=False)
        return (cutecall.cutlass_call(obj, output_shape_dtype=lambda x, s, sms: like(x),
                                      use_static_tensors=True),
                cutecall.torch.kernel(obj, static=True))

    def jax_static(concrete, seed):
        return objs()[0], base.jax(concrete, seed)[1]

    def torch_static(device, seed):
        return objs()[1], base.torch(device, seed)[1]

    def authors(device):
        import cutlass
        import cutlass.cute as cute

        from cutecall._driver.dsl import compile_args
        ht = mod(quack_hadamard_corpus.HADAMARD).HadamardTransform
        if device != "meta":
            return ht.compile(cutlass.BFloat16, n, False)
        cap = compile_args(ht.compile.__wrapped__, cutlass.BFloat16, n, False)
        with _building():
            return cute.compile(cap.kernel, *cap.args, **cap.kwargs)

    case = dataclasses.replace(base, name=f"repro.hadamard640[bf16 {m}x{n}]")
    return Repro(case, jax_static, torch_static, authors,
                 "N static, M dynamic, strides dynamic (class 8), 16-byte alignment",
                 quack_hadamard_corpus.jax_args_from_torch)
