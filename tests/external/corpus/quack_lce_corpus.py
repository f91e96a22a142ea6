"""QuACK's linear-cross-entropy GEMM (``quack.linear_cross_entropy``),
called the way QuACK calls it.

QuACK's fused linear cross-entropy (``chunked_linear_cross_entropy`` ->
``scaled_exp_linear_cross_entropy_fwd``, the SM90 bf16 path) starts each
chunk of rows with one GEMM whose epilogue (``scaled_exp_target_epi``)
never stores the logits z = x @ W.T. Per row and 192-wide vocab tile it
stores E = 2^(z log2 e - k) (k = the tile's rounded max in log2 units) and
three sink outputs: ``sum_exp`` (the tile's sum of E), ``max_log2_out`` (k)
and ``target_logit`` (z at the row's target; rows whose target is out of
range, e.g. ignore_index, are left untouched). Its epilogue NamedTuple
(minted by QuACK's epilogue frontend) holds a ``Constexpr[int]`` field
(``max_log2``: the group width, 192), the three sinks and the int32 targets.

QuACK's path to the kernel::

    scaled_exp_target_epi.gemm(x, W, E, epi_args=dict(max_log2=192,
        sum_exp=.., max_log2_out=.., target=.., target_logit=..),
        tile_M=128, tile_N=192, cluster_M=2, cluster_N=1, pingpong=True)
      build_gemm_epi_plan -> _compile_gemm_epi(class_ref, (9, 0), bf16 x3,
          None, "k", "k", "n", None, (128, 192), (2, 1, 1), ...)
        compile_gemm_kernel -> cute.compile(gemm, mA, mB, mD, None,
            EpilogueArguments(...), TileSchedulerOptions(...), None, stream)
      run_gemm_epi_plan -> compiled(A, B, D, None, epi_args,
          make_scheduler_args(max_active_clusters, 8, None), None, None, None)

:func:`captured` mints the class as ``EpiMod.gemm`` does and runs
``_compile_gemm_epi`` (undecorated: QuACK's ``@jit_cache`` bypassed) up to
``cute.compile``; the case hands its GEMM object to cutecall unchanged and
passes what QuACK passes at launch: arrays for the fake tensors, QuACK's own
``EpilogueArguments`` and ``TileSchedulerOptions``, ``max_log2`` and
``raster_order`` (Constexpr) at their compile values (QuACK passes None for
them at launch: TVM-FFI drops constexpr fields; cutecall takes them as part
of the compile key), ``max_active_clusters`` as an ``Int32``::

    call(x, W, None, epi, sched, None)  # JAX -> (E, sum_exp, max_log2_out,
                                        #         target_logit)
    kernel(x, W, E, None, epi, sched, None)  # torch: E and epi's sinks written

JAX: ``output_params=("mD",)`` places E; the sinks are input leaves of
``epi`` aliased to outputs 1-3 by key path. torch: E and the sinks are
written in place. On a device, E, ``sum_exp`` and ``max_log2_out`` start
NaN-filled (the kernel writes every element: a missed one shows) and
``target_logit`` zero-filled (the kernel leaves ignored rows as they are;
the references expect 0 there).

The configuration is the one QuACK's pipeline picks for a vocabulary that
192 divides (``_pick_tile_n1``; pingpong as ``tile_n1 <= 208``): :data:`TILE`.
Shapes (M rows, V vocab, d model): ``"test"`` (1000, 1536, 512) -- M not a
multiple of 16; ``"bench"`` (4096, 128256, 4096): one 4096-row chunk
(QuACK's default chunk size) of Llama-3's LM head. Targets are int32; every
7th row is ``ignore_index``.
"""

from __future__ import annotations

import functools

from . import Case
from .quack_common import (IGNORE_INDEX, JaxRandom, TorchRandom, bf16, jax_kernel, like,
                           mod, sds, torch_kernel)

__all__ = ["KERNELS", "SHAPES", "TILE", "SINKS", "cases", "case", "captured",
           "gemm_epi_compile_args", "jax_args_from_torch"]

KERNELS = ("linear_cross_entropy",)

# (M, V, d) per size.
SHAPES = {
    "test": {"linear_cross_entropy": (1000, 1536, 512)},
    "bench": {"linear_cross_entropy": (4096, 128256, 4096)},
}

# QuACK's gemm1 configuration in scaled_exp_linear_cross_entropy_fwd.
TILE = {"tile_M": 128, "tile_N": 192, "cluster_M": 2, "cluster_N": 1, "pingpong": True}
SINKS = ("sum_exp", "max_log2_out", "target_logit")
LOG2E = 1.4426950408889634  # quack.epilogue.scaled_exp.LOG2E
NAN = float("nan")
HOPPER_SMS = 132            # H100/H200: max_active_clusters without a GPU


def cases(size: str) -> list[Case]:
    """The linear cross-entropy cases at `size` ("test" or "bench")."""
    if size not in SHAPES:
        raise ValueError(f"size must be one of {sorted(SHAPES)}, got {size!r}")
    return [case(*SHAPES[size]["linear_cross_entropy"])]


@functools.lru_cache(maxsize=None)
def gemm_epi_compile_args() -> tuple:
    """The positional arguments QuACK's ``build_gemm_epi_plan`` passes to
    ``_compile_gemm_epi`` for gemm1 (:data:`TILE`, sm90, bf16 x/W/E, int32
    targets, 2-D sinks), reconstructed as ``EpiMod.gemm`` computes them
    without a GPU: the class reference of its mint key, then dtypes,
    majors, tile, cluster, flags and the epilogue keys."""
    import cutlass
    import torch
    from quack.epilogue.frontend import _pinned_visit_kind
    from quack.epilogue.scaled_exp import scaled_exp_target_epi as epi
    from quack.rounding import RoundingMode
    # EpiMod.gemm's mint key: the pinned MaxLog2 operand as a value port in
    # its constexpr form (max_log2 an int), sm90, no acc pairing, packed C
    # or prepass operands, round-to-nearest, no add_to_output.
    pin = epi.ops["max_log2"]
    mint_key = ((("max_log2", _pinned_visit_kind(pin)),), 9, False, False, (),
                RoundingMode.RN, (("max_log2", pin.host_arg_form(TILE["tile_N"])),), False)
    gemm_cls = epi._mint(*mint_key)

    # build_gemm_epi_plan's epi_keys: each op's host_arg_key of its value.
    def meta(*shape, dtype=torch.float32):
        return torch.empty(shape, dtype=dtype, device="meta")
    values = {"max_log2": TILE["tile_N"], "sum_exp": meta(1, 1), "max_log2_out": meta(1, 1),
              "target": meta(1, dtype=torch.int32), "target_logit": meta(1)}
    epi_keys = tuple(sorted((op.name, op.host_arg_key(values[op.name]))
                            for op in gemm_cls._epi_ops))
    bf = cutlass.BFloat16
    # (ref, capacity, a/b/d/c dtypes, a/b/d/c majors, tile, cluster,
    #  pingpong, persistent, dynamic persistent, varlen_m, gather_A,
    #  batched, b_kn, epi_keys)
    return (epi._class_ref(mint_key), (9, 0), bf, bf, bf, None, "k", "k", "n", None,
            (TILE["tile_M"], TILE["tile_N"]), (TILE["cluster_M"], TILE["cluster_N"], 1),
            TILE["pingpong"], True, False, False, False, False, False, epi_keys)


@functools.lru_cache(maxsize=None)
def captured():
    """QuACK's ``_compile_gemm_epi(*gemm_epi_compile_args())``, stopped at
    its ``cute.compile``: ``(kernel, args, kwargs)``, nothing compiled
    (``authors.compile_args``)."""
    from quack.gemm_runtime.host import _compile_gemm_epi
    from .authors import compile_args
    return compile_args(_compile_gemm_epi.__wrapped__, *gemm_epi_compile_args())


@functools.lru_cache(maxsize=None)
def _calls():
    """(JAX call, torch kernel), shared by every case: one kernel object."""
    def build():
        return captured().kernel

    def outputs(x, w, c, epi, scheduler, varlen):
        return (sds((x.shape[0], w.shape[0]), x.dtype),
                *(like(getattr(epi, s)) for s in SINKS))
    call = jax_kernel(build, outputs, output_params=("mD",),
                      input_output_aliases={(3, s): 1 + i for i, s in enumerate(SINKS)})
    return call, torch_kernel(build, outputs=["mD"])


def _epilogue(sum_exp, max_log2_out, target, target_logit):
    """QuACK's EpilogueArguments of the captured class, as
    run_gemm_epi_plan fills it (split-K fields None), max_log2 at its
    compile value."""
    fake = captured().args[4]
    return type(fake)(max_log2=fake.max_log2, sum_exp=sum_exp, target_logit=target_logit,
                      max_log2_out=max_log2_out, target=target)


def _scheduler(on_gpu: bool):
    """QuACK's launch-time TileSchedulerOptions (``make_scheduler_args``),
    raster_order (Constexpr) at its compile value."""
    clusters = TILE["cluster_M"] * TILE["cluster_N"]
    n = mod("quack.cute_dsl_utils").get_max_active_clusters(clusters) if on_gpu \
        else HOPPER_SMS // clusters
    # max_swizzle_size: EpiMod.gemm's default, as QuACK's pipeline leaves it.
    fake = captured().args[5]
    return mod("quack.gemm_tvm_ffi_utils").make_scheduler_args(n, 8, None)._replace(
        raster_order=fake.raster_order)


def case(m: int, v: int, d: int) -> Case:
    """The LCE gemm1 on x (m, d), W (v, d) bf16; `v` a multiple of 192."""
    if v % TILE["tile_N"]:
        raise ValueError(f"V = {v} must be a multiple of tile_N = {TILE['tile_N']}")
    tiles = v // TILE["tile_N"]
    calls = _calls()

    def jax_case(concrete, seed):
        import jax.numpy as jnp
        r = JaxRandom(concrete, seed)
        x, w = r.normal((m, d), bf16()), r.normal((v, d), bf16(), d ** -0.5)
        target = r.randint((m,), jnp.int32, v)
        if concrete:
            target = target.at[::7].set(IGNORE_INDEX)

        def full(value, *shape):
            return jnp.full(shape, value, jnp.float32) if concrete \
                else sds(shape, jnp.float32)
        epi = _epilogue(full(NAN, m, tiles), full(NAN, m, tiles), target, full(0.0, m))
        return calls[0](), (x, w, None, epi, _scheduler(concrete), None)

    def torch_case(device, seed):
        import torch
        r = TorchRandom(device, seed)
        x, w = r.normal((m, d), bf16(False)), r.normal((v, d), bf16(False), d ** -0.5)
        target = r.randint((m,), torch.int32, v)
        if not r.meta:
            target[::7] = IGNORE_INDEX

        def full(value, *shape, dtype=torch.float32):
            return torch.full(shape, value, dtype=dtype, device=r.device)
        epi = _epilogue(full(NAN, m, tiles), full(NAN, m, tiles), target, full(0.0, m))
        e = full(NAN, m, v, dtype=bf16(False))
        return calls[1](), (x, w, e, None, epi, _scheduler(r.device.type == "cuda"), None)

    def jax_ref(x, w, c, epi, scheduler, varlen):
        import jax
        import jax.numpy as jnp
        z = jnp.matmul(x.astype(jnp.float32), w.astype(jnp.float32).T,
                       precision=jax.lax.Precision.HIGHEST)
        z_tiles = z.reshape(m, tiles, TILE["tile_N"])
        k = jnp.round(z_tiles.max(-1) * LOG2E)  # half to even, as the kernel
        e = jnp.exp2(z_tiles * LOG2E - k[..., None])
        t = epi.target
        valid = (t >= 0) & (t < v)
        picked = jnp.take_along_axis(z, jnp.clip(t, 0, v - 1)[:, None], axis=1)[:, 0]
        return (e.reshape(m, v), e.sum(-1), k, jnp.where(valid, picked, 0.0))

    def torch_ref(x, w, e, c, epi, scheduler, varlen):
        import torch
        z = x.float() @ w.float().T
        z_tiles = z.view(m, tiles, TILE["tile_N"])
        k = torch.round(z_tiles.amax(-1) * LOG2E)
        e = torch.exp2(z_tiles * LOG2E - k[..., None])
        t = epi.target.long()
        valid = (t >= 0) & (t < v)
        picked = z.gather(1, t.clamp(0, v - 1)[:, None])[:, 0]
        return (e.view(m, v), {"sum_exp": e.sum(-1), "max_log2_out": k,
                               "target_logit": torch.where(valid, picked, 0.0)})

    def authors_torch(x, w, e, c, epi, scheduler, varlen):
        # scaled_exp_linear_cross_entropy_fwd's gemm1, on our buffers.
        mod("quack.epilogue.scaled_exp").scaled_exp_target_epi.gemm(
            x, w, e, c, epi_args={f: getattr(epi, f) for f in
                                  ("max_log2", "target", *SINKS)}, **TILE)

    return Case(f"quack.linear_cross_entropy[bf16 {m}x{v}x{d}]", jax_case, jax_ref,
                torch_case, (2, 4), torch_ref, authors_torch, None, atol=2e-2, rtol=2e-2)


def jax_args_from_torch(args):
    """The JAX call's arguments holding the values of the torch call's
    `args` (launcher order, E included): the same inputs and sink buffers,
    so both fronts and QuACK's path can be compared bit for bit."""
    import jax.numpy as jnp
    x, w, _e, c, epi, scheduler, varlen = args
    def copy(t):
        return jnp.from_dlpack(t.detach().clone().contiguous())  # a copy (copy=True: unsupported by the GPU PJRT)
    epi = epi._replace(**{f: copy(getattr(epi, f)) for f in ("target", *SINKS)})
    return (copy(x), copy(w), c, epi, scheduler, varlen)
