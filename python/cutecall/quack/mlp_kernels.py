"""The QuACK GEMMs of :mod:`cutecall.quack.mlp` as JAX calls: one
kernel object per (GEMM, tile, target arch), built by QuACK's own compile
functions for the target's device capacity ((9, 0) on sm_90a, (10, 0) on
sm_100a: :func:`cutecall.quack.tiles.capacity`) and handed to
``cutecall.cutlass_call`` unchanged, with the argument containers QuACK's
launch passes.

==============  =======================================  ==================
GEMM            QuACK's torch call in ``quack.mlp``      ``call(...)(...)``
==============  =======================================  ==================
``act``         ``gemm_act(x, w1.T, act)``               ``(x, w1) -> (preact, postact)``
``act_infer``   the same, ``store_preact=False``         ``(x, w1) -> postact``
``dact``        ``gemm_dact(dout, w2, preact, act)``     ``(dout, w2, preact) -> (dpreact, postact)``
``fc2``         ``gemm(postact, w2.T)``                  ``(a, b) -> a @ b.T``
``dgrad``       ``gemm(dpreact, w1)``                    ``(a, b) -> a @ b``
``wgrad``       ``gemm(dout.T, postact)``                ``(a, b) -> a.T @ b``
==============  =======================================  ==================

``act``/``act_infer``/``dact`` run QuACK's epilogue objects
(``quack.epilogue.library.linear_act_mod`` / ``dact_mod``) compiled by
``quack.gemm_runtime.host._compile_gemm_epi``; the rest run
``GemmDefaultSm90`` / ``GemmDefaultSm100`` compiled by
``quack.gemm._compile_gemm``. Both are run through
:func:`cutecall.compile_args` up to their ``cute.compile``, under
``target.building()``: the kernel object and the ``EpilogueArguments`` /
``TileSchedulerOptions`` are QuACK's own. As QuACK does on sm90 and sm100, B
crosses as (K, N) (``b_kn``: the kernel transposes it at trace time); a
k-major B (``w.T``) or an m-major A (``dout.T``) is a row-major JAX array
seen through ``TensorSpec(mode=(1, 0))``, a view, as QuACK's ``.T`` is. The
persistent grid (``max_active_clusters``) is a runtime scalar read from the
target's device (:func:`max_active_clusters`): it never recompiles.

One difference from QuACK's backward on sm90: it asks for the dynamic
persistent scheduler (``dynamic_scheduler=True``), whose
``tile_count_semaphore`` is a raw device pointer cutecall does not pass;
every sm90 GEMM here uses QuACK's static persistent scheduler, as its
forward does. On sm100 QuACK's dynamic scheduler is cluster launch control,
which needs no semaphore: a tile's ``clc`` picks it. Which CTA computes a
tile changes, not its arithmetic: the outputs are the same bits.
:func:`authors_torch` is QuACK's own torch call of each row, pinned to the
same tile and scheduler: the bit-exact reference of the GPU tests in
``tests/quack`` and the torch side of ``bench/quack_mlp``.
"""

from __future__ import annotations

import functools

from cutecall.quack import tiles as qt
from cutecall.quack.gemm import GRAPHS
from cutecall.quack.tiles import SM90, Tile  # noqa: F401  (SM90: old name)

__all__ = ["GEMMS", "PLAIN", "LAYOUTS", "PARAMS", "OUTPUTS", "call", "launch_args",
           "authors_args", "authors_torch", "gemm_config", "max_active_clusters"]

# A's and B's majors as QuACK's host derives them (B under b_kn: "n" when
# the (K, N) operand is row-major, "k" when it is a transposed (N, K) one).
LAYOUTS = {"act": ("k", "k"), "act_infer": ("k", "k"), "dact": ("k", "n"),
           "fc2": ("k", "k"), "dgrad": ("k", "n"), "wgrad": ("m", "n")}
GEMMS = tuple(LAYOUTS)
PLAIN = ("fc2", "dgrad", "wgrad")   # GemmDefaultSm90/Sm100, no activation


def authors_args(gemm: str, tile: Tile, dtype: str, activation: str | None = None,
                 target=None):
    """``cutecall.compile_args``' ``Captured(kernel, args, kwargs)``: what
    QuACK's compile function for `gemm` hands to ``cute.compile`` for
    `target` (default ``cutecall.current_target()``; nothing is compiled).
    ``args`` = (mA, mB, mD, mC, epilogue_args, scheduler_args, varlen_args,
    stream, mSFA, mSFB), fake tensors included."""
    target = qt.resolve(target)
    qt.check(tile, target, "cutecall.quack.mlp_kernels")
    return _authors_args(gemm, tile, dtype, activation, target.arch)


@functools.lru_cache(maxsize=None)
def _authors_args(gemm: str, tile: Tile, dtype: str, activation: str | None, arch: str):
    from quack.gemm import _compile_gemm
    from quack.gemm_runtime.host import _compile_gemm_epi
    from quack.rounding import RoundingMode

    from cutecall import compile_args, current_target, jax_to_cutlass_dtype

    target = current_target(arch)
    cap = qt.capacity(target)
    dt = jax_to_cutlass_dtype(dtype)
    a_major, b_major = LAYOUTS[gemm]
    config = ((tile.tile_m, tile.tile_n), (tile.cluster_m, tile.cluster_n, 1),
              tile.pingpong, tile.persistent, tile.clc)  # ..., persistent, dynamic
    with target.building():
        if gemm in PLAIN:
            # quack.gemm._build_gemm_plan for an unbatched 2-D GEMM with no
            # C, bias, alpha/beta, rounding seed, varlen, split-k or SF.
            return compile_args(
                _compile_gemm.__wrapped__, dt, dt, dt, None, a_major, b_major, "n", None,
                *config, None, None, 0, 0, 0, False, (), False, False, False, False, False,
                cap, RoundingMode.RN, 0, None, batched=False, b_kn=True)
        mod = epilogue(gemm, activation)
        # EpiMod.gemm's mint key: (operand kinds, sm, acc_pair, packed C,
        # prepass, rounding, arg forms, add_to_output); dact reads C (preact).
        kinds = (("c", "c"),) if gemm == "dact" else ()
        ref = mod._class_ref((kinds, cap[0], False, False, (), RoundingMode.RN, (), False))
        d = None if gemm == "act_infer" else dt
        c = dt if gemm == "dact" else None
        # TileStore.host_arg_key of the postact buffer: (dtype, "n"-major).
        epi_keys = (("mAuxOut", (dt, "n")),)
        return compile_args(
            _compile_gemm_epi.__wrapped__, ref, cap, dt, dt, d, c, a_major, b_major,
            d and "n", c and "n", *config, False, False, False, True, epi_keys)


def epilogue(gemm: str, activation: str):
    """QuACK's epilogue object of ``gemm_act`` / ``gemm_dact`` (as
    ``quack.gemm_interface._gemm_act_call`` / ``_gemm_dact_call`` pick it)."""
    from quack.epilogue.library import dact_mod, linear_act_mod
    if gemm == "dact":
        return dact_mod(activation, has_scale=False, has_reduce=False)
    return linear_act_mod(activation, gated=False, has_c=False, has_rowvec=False,
                          has_colvec=False, sr=False, has_alpha=False)


def max_active_clusters(cluster_size: int, target=None) -> int:
    """QuACK's persistent grid (``get_max_active_clusters``) on `target`'s
    device (default ``cutecall.current_target()``: the GPU when it is of the
    target's arch, else ``$CUTECALL_DEVICE``'s row or the arch's default,
    H100 SXM / B200). A runtime scalar: it never recompiles."""
    return qt.resolve(target).device.max_active_clusters(cluster_size)


PARAMS = ("mA", "mB", "mD", "mC", "epilogue_args", "scheduler_args", "varlen_args")
# The launcher parameters each GEMM writes: D, and the postact inside
# QuACK's EpilogueArguments (``mAuxOut``) for the activation epilogues.
OUTPUTS = {"act": ("mD", "epilogue_args"), "act_infer": ("epilogue_args",),
           "dact": ("mD", "epilogue_args"), "fc2": ("mD",), "dgrad": ("mD",),
           "wgrad": ("mD",)}


def launch_args(gemm: str, tile: Tile, dtype: str, activation, a, b, c=None,
                target=None) -> tuple:
    """The launcher's arguments (``PARAMS``) for the operands `a`, `b` (and
    the preact `c` of ``dact``) as QuACK's launch builds them for `target`:
    outputs as ``jax.ShapeDtypeStruct``s in the slots the kernel writes,
    QuACK's ``EpilogueArguments`` and ``TileSchedulerOptions`` (the
    compile-time fields as QuACK compiled them; the persistent grid is a
    runtime Int32)."""
    import cutlass
    import jax

    target = qt.resolve(target)
    captured = authors_args(gemm, tile, dtype, activation, target)
    epi_args, scheduler = captured.args[4], captured.args[5]
    m = a.shape[1] if gemm == "wgrad" else a.shape[0]
    n = b.shape[0] if LAYOUTS[gemm][1] == "k" else b.shape[1]
    out = jax.ShapeDtypeStruct((m, n), a.dtype)
    if "epilogue_args" in OUTPUTS[gemm]:
        epi_args = epi_args._replace(mAuxOut=out)
    size = tile.cluster_m * tile.cluster_n
    clusters = max_active_clusters(size, target) if tile.persistent else 0
    scheduler = scheduler._replace(max_active_clusters=cutlass.Int32(clusters))
    return (a, b, None if gemm == "act_infer" else out, c, epi_args, scheduler, None)


def _specs(dims, a_transposed=False, b_transposed=False):
    """A TensorSpec per array named by its GEMM dims: row-major, the
    contiguous dim a multiple of 8 (TMA's 16-byte rows; QuACK's fake strides
    declare the same); a transposed operand is the (1, 0) view of its array."""
    from cutecall import TensorSpec
    flips = (a_transposed, b_transposed) + (False,) * len(dims)
    return tuple(TensorSpec(dims=d, divisibility=(1, 8), mode=(1, 0) if flip else None)
                 for d, flip in zip(dims, flips))


def call(gemm: str, tile: Tile, dtype: str, activation: str | None = None, target=None):
    """The JAX function running `gemm` with `tile` (see the table above) on
    `target` (default ``cutecall.current_target()``); one per (GEMM, tile,
    dtype, activation, arch): a plain GEMM ignores `activation`, so all its
    uses share one compiled kernel. A ValueError naming the arch when the
    target's QuACK GEMM has no such tile."""
    if gemm not in LAYOUTS:
        raise ValueError(f"cutecall.quack.mlp_kernels.call: gemm must be one of {GEMMS}, got {gemm!r}")
    target = qt.resolve(target)
    qt.check(tile, target, "cutecall.quack.mlp_kernels.call")
    return _call(gemm, tile, dtype, None if gemm in PLAIN else activation, target.arch)


@functools.lru_cache(maxsize=None)
def _call(gemm: str, tile: Tile, dtype: str, activation: str | None, arch: str):
    import cutecall

    target = cutecall.current_target(arch)
    writes = [PARAMS.index(p) for p in OUTPUTS[gemm]]
    arrays = 3 if gemm == "dact" else 2

    def arguments(*args):
        return launch_args(gemm, tile, dtype, activation, *args[:arrays], target=target)

    b_t = LAYOUTS[gemm][1] == "k"
    a_dims = ("k", "m") if gemm == "wgrad" else ("m", "k")
    b_dims = ("n", "k") if b_t else ("k", "n")
    plain = gemm in PLAIN
    name = (f"quack_mlp_{gemm}_{qt.tag(tile, target)}_{dtype}"
            + ("" if plain else f"_{activation}"))
    run = cutecall.cutlass_call(
        authors_args(gemm, tile, dtype, activation, target).kernel,
        output_shape_dtype=lambda *args: tuple(arguments(*args)[i] for i in writes),
        output_params=OUTPUTS[gemm],
        input_spec=_specs((a_dims, b_dims, ("m", "n"))[:arrays], gemm == "wgrad", b_t),
        output_spec=_specs((("m", "n"),) * len(writes)), name=name,
        allow_cuda_graph=GRAPHS, compile_options=f"--gpu-arch {arch}")

    def apply(*operands):
        full = arguments(*operands)
        outs = run(*(x for i, x in enumerate(full) if i not in writes))
        outs = [o.mAuxOut if p == "epilogue_args" else o for p, o in zip(OUTPUTS[gemm], outs)]
        return outs[0] if len(outs) == 1 else tuple(outs)
    apply.__name__ = apply.__qualname__ = name
    return apply


def gemm_config(tile: Tile, target=None):
    """QuACK's ``GemmConfig`` for `tile` on `target` (default
    ``cutecall.current_target()``): its device capacity, and the static
    scheduler or (a ``clc`` tile on sm100) the dynamic one."""
    from quack.gemm_config import GemmConfig
    target = qt.resolve(target)
    qt.check(tile, target, "cutecall.quack.mlp_kernels.gemm_config")
    return GemmConfig(tile_m=tile.tile_m, tile_n=tile.tile_n, pingpong=tile.pingpong,
                      is_dynamic_persistent=tile.clc, cluster_m=tile.cluster_m,
                      cluster_n=tile.cluster_n, device_capacity=qt.capacity(target)[0])


def authors_torch(gemm: str, tile: Tile, activation: str | None = None, target=None):
    """QuACK's own torch call for `gemm` (the table above) pinned to `tile`
    and its scheduler on `target`: a function of torch tensors in the
    operand order of ``call(gemm, ...)``, returning the same outputs. The
    reference our outputs must equal bit for bit, and the torch side of the
    benchmark."""
    from quack.gemm_interface import gemm_act, gemm_dact, gemm_tuned

    config = gemm_config(tile, target)
    pinned = dict(config=config, dynamic_scheduler=False, tuned=False)

    def plain(a, b):  # quack.gemm_interface.gemm with the config pinned
        out = a.new_empty((a.shape[0], b.shape[1]))
        gemm_tuned.fn(a, b, out, config=config, dynamic_scheduler=False)
        return out
    return {
        "act": lambda x, w: gemm_act(x, w.T, activation=activation, **pinned),
        "act_infer": lambda x, w: gemm_act(x, w.T, activation=activation,
                                           store_preact=False, **pinned)[1],
        "dact": lambda dout, w, preact: gemm_dact(dout, w, preact, activation=activation,
                                                  **pinned),
        "fc2": lambda a, b: plain(a, b.T),
        "dgrad": plain,
        "wgrad": lambda a, b: plain(a.T, b),
    }[gemm]
