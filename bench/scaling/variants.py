"""The scaling suite's step variants (bench/scaling/suite.py), built on
bench/scaling/steps.py's cases:

  model     "one": the issue's one-layer step (steps.py, unchanged);
            "C2", "C4" (MLP steps): the hidden dimension in 2 or 4 chunks,
            each its own weights and its own MLP call, the outputs summed:
            the same function, with a gradient all-reduce per chunk that
            can run while the next chunk's backward GEMMs compute (DDP's
            gradient buckets; with +tuned/+dp, which keep all-reduces apart);
            "NPW" (QuACK's MLP): its weight-gradient GEMMs non-persistent
            (one CTA per tile, as cuBLAS's: NCCL finds SMs as CTAs leave);
            "NPW1": only the last one (dw1), which dw2's all-reduce overlaps
            (both without blocks: grad_chunks 1); "OV0": the MLP without
            gradient overlap (grad_overlap=False: the step before it);
            "K2", "K4", "K8": gradient overlap in 2, 4 or 8 blocks (default 1);
            "R16", "R32" (QuACK's MLP): its weight-gradient GEMMs launch a
            persistent grid of 132 - 16 (32) SMs, leaving SMs to the NCCL
            kernel they may overlap (a static persistent CTA that finds no
            SM starts its tiles only when one frees: a GEMM beside a long
            all-reduce ends an all-reduce later); process-wide in its child;
            "L4": four blocks of (q/k/v projections, causal attention,
            out-projection, residual) on x (B, S, E), squared loss against
            y (B, S, E): a model whose layer i's gradient all-reduce can
            overlap layer i-1's backward
  grads     "auto": JAX sums the replicated weights' gradient itself
            (the loss is averaged over the devices first, as steps.py).
            JAX places that psum where the replicated value meets the
            batch: at the weights' cast to bfloat16, so the float32 master
            weights' gradient is all-reduced in bfloat16 already;
            "f32" (or "bf16"): each device's gradient of its own loss, in
            float32, averaged with ``pmean`` in that dtype (one all-reduce
            per tensor), cast back to the weights' float32: what a float32
            reduction costs (the first probe's step paid one beside JAX's)
  xla       "default", or "overlap": no combining of all-reduces (one per
            gradient tensor) and the latency-hiding scheduler, so a
            gradient's all-reduce runs while later backward work computes;
            "dp": nomerge + overlap (long-standing options only: what
            ``cutecall.attention.training.sharded_step`` compiles with);
            "nomerge": XLA's DotMerger off (``xla_gpu_dot_merger_threshold_mb``
            0: dots sharing an operand are not merged into one dot on a
            concatenate, sliced after); "tuned": nomerge + overlap + each
            collective started as early as possible (an option dropped where
            the jaxlib lacks it); "nocollcb": command buffers of XLA's default
            types but collectives (``XLA_FLAGS``, :data:`XLA_ENV`)

``stub=True`` (CPU smoke runs) puts XLA's own attention in place of FA4 and
cuDNN, and XLA's dot in place of QuACK's GEMMs: the same programs' shapes
and collectives, nothing the CPU cannot run.
"""

from __future__ import annotations

import steps
from cutecall.attention.training import DATA_PARALLEL_OPTIONS

OVERLAP = {"xla_gpu_all_reduce_combine_threshold_bytes": 1,
           "xla_gpu_enable_latency_hiding_scheduler": True}
NOMERGE = {"xla_gpu_dot_merger_threshold_mb": 0}
XLA = {"default": {}, "overlap": OVERLAP, "nomerge": NOMERGE, "dp": dict(DATA_PARALLEL_OPTIONS),
       "tuned": dict(NOMERGE, **OVERLAP,
                     xla_gpu_experimental_collective_start_as_early_as_possible=True),
       "nocollcb": {}, "cboff": {}, "cbprof": {}, "nocustomcb": {}}  # XLA_ENV's
# Options a jaxlib may lack: a compile that fails with them is retried
# without them (suite_child.py records what it dropped and why).
OPTIONAL = ("xla_gpu_experimental_collective_start_as_early_as_possible",)
# Variants set through XLA_FLAGS (their child's environment, before jax
# loads): XLA's flag parser takes "-TYPE" as "the default list without TYPE",
# compile options do not.
XLA_ENV = {"nocollcb": "--xla_gpu_enable_command_buffer=-COLLECTIVES",
           # no command buffers at all: the loop as the profiler sees it
           "cboff": "--xla_gpu_enable_command_buffer=",
           # command buffers kept while tracing: the trace as the loop runs
           "cbprof": "--xla_enable_command_buffers_during_profiling=true",
           # command buffers without custom calls: cutecall's run as thunks
           "nocustomcb": "--xla_gpu_enable_command_buffer=-CUSTOM_CALL"}
LAYERS = {"one": 1, "L4": 4}
CHUNKS = {"C2": 2, "C4": 4}
RESERVED = {"R16": 16, "R32": 32}
NON_PERSISTENT = {"NPW": ("dw2", "dw1"), "NPW1": ("dw1",)}  # model -> sites
MLP_KW = {"NPW": {"grad_overlap": False}, "NPW1": {"grad_overlap": False},
          "OV0": {"grad_overlap": False}, "K2": {"grad_chunks": 2},
          "K4": {"grad_chunks": 4}, "K8": {"grad_chunks": 8}}  # model -> cutecall.quack.mlp.mlp's keywords
DTYPES = {"f32": "float32", "bf16": "bfloat16"}


def name(impl: str, model: str = "one", grads: str = "auto", xla: str = "default") -> str:
    """The row's impl name: fa4_cutecall, fa4_cutecall_L4+bf16grad+overlap..."""
    return (impl + ("" if model == "one" else f"_{model}")
            + ("" if grads == "auto" else f"+{grads}grad")
            + ("" if xla == "default" else f"+{xla}"))


def attention_fn(impl: str, stub: bool):
    """(q, k, v) -> causal attention of `impl`."""
    import jax
    if stub:
        return lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                             implementation="xla")
    if impl == "fa4_cutecall":
        from cutecall.attention import attention
        return lambda q, k, v: attention(q, k, v, causal=True)
    return lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                         implementation="cudnn")


def case(impl: str, model: str = "one", stub: bool = False, sizes: dict | None = None):
    """steps.Case for `impl` and `model` (stubbed for the CPU)."""
    if model in MLP_KW:
        if impl != "mlp_quack" or stub:
            model = "one"  # the stub's XLA dot has neither persistence nor blocks
        else:
            c = steps.case(impl, sizes)
            tiles = steps.pinned_tiles(non_persistent=NON_PERSISTENT.get(model, ()))
            return steps.Case(impl, c.sizes, c.problem,
                              steps.mlp_loss(impl, tiles, **MLP_KW[model]))
    if model in RESERVED:
        if impl != "mlp_quack":
            raise ValueError(f"model {model!r} is for mlp_quack, not {impl}")
        if not stub:
            _reserve_wgrad_sms(RESERVED[model])
        model = "one"
    if model == "one" and not stub:
        return steps.case(impl, sizes)
    if impl.startswith("mlp"):
        if model != "one" and model not in CHUNKS:
            raise ValueError(f"model {model!r} is for the attention steps, not {impl}")
        gemms = "mlp_xla" if stub else impl  # stub: XLA's dot for both
        c = steps.case(gemms, sizes)
        if model == "one":
            return steps.Case(impl, c.sizes, c.problem, c.loss)
        return steps.Case(impl, c.sizes, _chunked_problem(c.problem, CHUNKS[model]),
                          _chunked_loss(steps.mlp_fn(gemms)))
    if model in CHUNKS:
        raise ValueError(f"model {model!r} is for the MLP steps, not {impl}")
    sizes = dict(steps.ATTENTION, **(sizes or {}))
    attn = attention_fn(impl, stub)
    if model == "one":
        return steps.Case(impl, sizes, steps._attention_problem(sizes), _one_loss(attn))
    layers = LAYERS[model]
    return steps.Case(impl, sizes, _deep_problem(sizes, layers), _deep_loss(attn, sizes))


def _one_loss(attn):
    def loss(w, x, y):
        import jax.numpy as jnp
        d = y.shape[-1]

        def proj(n):
            return (x @ w[n].astype(x.dtype)).reshape(x.shape[:2] + (-1, d))
        o = attn(proj("q"), proj("k"), proj("v"))
        return jnp.mean((o.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)
    return loss


def _reserve_wgrad_sms(sms: int):
    """QuACK's weight-gradient GEMMs (``mlp_kernels`` "wgrad") launch with
    `sms` fewer SMs in their persistent grid (a runtime Int32: the same
    compiled kernel), for the rest of this process."""
    import cutlass
    from cutecall.quack import mlp_kernels as mk
    plain = getattr(mk.launch_args, "plain", mk.launch_args)

    def launch_args(gemm, tile, dtype, activation, *arrays):
        out = plain(gemm, tile, dtype, activation, *arrays)
        if gemm != "wgrad":
            return out
        size = tile.cluster_m * tile.cluster_n
        clusters = (mk.max_active_clusters(size) * size - sms) // size
        return out[:5] + (out[5]._replace(max_active_clusters=cutlass.Int32(clusters)),) + out[6:]
    launch_args.plain = plain
    mk.launch_args = launch_args


def _chunked_problem(problem, k):
    """The MLP's (w, x, y) with w1 (hidden, d) and w2 (d, hidden) cut into
    `k` chunks of the hidden dimension: [{"w1", "w2"}] * k."""
    def chunked(key):
        import jax.numpy as jnp
        w, x, y = problem(key)
        w1s = jnp.split(w["w1"], k, axis=0)
        w2s = jnp.split(w["w2"], k, axis=1)
        return [{"w1": a, "w2": b} for a, b in zip(w1s, w2s)], x, y
    return chunked


def _chunked_loss(mlp):
    """The MLP loss on chunked weights: the sum over chunks of mlp(x, w1_i,
    w2_i), which equals mlp(x, w1, w2) (the activation is elementwise over
    the hidden dimension), as one MLP call per chunk."""
    def loss(w, x, y):
        import jax.numpy as jnp
        out = sum(mlp(x, c["w1"], c["w2"]).astype(jnp.float32) for c in w)
        return jnp.mean((out - y.astype(jnp.float32)) ** 2)
    return loss


def _deep_problem(sizes, layers):
    def problem(key):
        import jax
        import jax.numpy as jnp
        b, s, e = sizes["batch"], sizes["seqlen"], sizes["embed"]
        h, hkv, d = sizes["heads"], sizes["heads_kv"], sizes["head_dim"]
        kx, ky, kw = jax.random.split(key, 3)
        w = []
        for k in jax.random.split(kw, layers):
            kq, kk, kv, ko = jax.random.split(k, 4)
            w.append({"q": 0.05 * jax.random.normal(kq, (e, h * d)),
                      "k": 0.05 * jax.random.normal(kk, (e, hkv * d)),
                      "v": 0.05 * jax.random.normal(kv, (e, hkv * d)),
                      "o": jax.random.normal(ko, (h * d, e)) / (h * d) ** 0.5})
        x = jax.random.normal(kx, (b, s, e)).astype(jnp.bfloat16)
        y = jax.random.normal(ky, (b, s, e)).astype(jnp.bfloat16)
        return w, x, y
    return problem


def _deep_loss(attn, sizes):
    d = sizes["head_dim"]

    def loss(w, x, y):
        import jax.numpy as jnp
        h = x
        for layer in w:
            def proj(n):
                return (h @ layer[n].astype(h.dtype)).reshape(h.shape[:2] + (-1, d))
            o = attn(proj("q"), proj("k"), proj("v"))
            h = h + o.reshape(h.shape) @ layer["o"].astype(h.dtype)
        return jnp.mean((h.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)
    return loss


def _varying(a, axis):
    import jax
    if hasattr(jax.lax, "pcast"):
        return jax.lax.pcast(a, axis, to="varying")
    return jax.lax.pvary(a, axis)  # jax < 0.8


def reduced_step(c, dtype, axis: str, lr: float = 0.1):
    """An SGD step whose gradient is each device's own, averaged across
    `axis` in `dtype` (one pmean per tensor). Equal to steps.Case.step's
    global-batch gradient up to `dtype`'s rounding."""
    import jax

    def step(w, x, y):
        wv = jax.tree.map(lambda a: _varying(a, axis), w)
        g = jax.grad(c.loss)(wv, x, y)
        g = jax.tree.map(lambda a: jax.lax.pmean(a.astype(dtype), axis), g)
        return jax.tree.map(lambda p, g: (p - lr * g.astype(p.dtype)).astype(p.dtype), w, g)
    return step


def on_devices(c, devices, grads: str = "auto"):
    """(step, (w, x, y)) on `devices`, as steps.on_devices, the gradient
    averaged in `grads` ("f32", "bf16") on more than one device."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P
    if grads == "auto" or len(devices) == 1:
        step, args = steps.on_devices(c, devices)
        if grads == "auto":
            return step, args
        # one device: the same casts, no collective
        return jax.jit(lambda w, x, y: _cast_step(c, w, x, y, DTYPES[grads])), args
    mesh = Mesh(np.array(devices), ("b",))
    w, x, y = c.problem(jax.random.key(0))
    fn = jax.jit(jax.shard_map(reduced_step(c, DTYPES[grads], "b"), mesh=mesh,
                               in_specs=(P(), P("b"), P("b")), out_specs=P()))
    return fn, steps.place(mesh, w, x, y)


def _cast_step(c, w, x, y, dtype: str, lr: float = 0.1):
    import jax
    g = jax.grad(c.loss)(w, x, y)
    return jax.tree.map(lambda p, g: (p - lr * g.astype(dtype).astype(p.dtype))
                        .astype(p.dtype), w, g)
