"""The scaling suite's plans (bench/scaling/suite.py ``--plan``): which child
processes run, in priority order, each with its configurations in order.

  table   the issue's table (FA4 through cutecall and on cuDNN, QuACK's MLP
          and the MLP on XLA's dot, each at 1, 4, 2 GPUs; every step traced
          at 1 and 4 GPUs), then the variants of bench/scaling/variants.py
          (+overlap, _L4, +f32grad)
  flags   where the 4-GPU loss goes and whether an XLA option removes it:
          1. both MLP steps at 1/4/2 GPUs (XLA's first: QuACK's GEMMs compile
             in the background meanwhile), traced at 1 and 4;
          2. both attention steps plain, +nomerge and +tuned at 1/4/2 (the
             plain rows are this machine's baseline), traced at 1 and 4;
          3. the MLP steps +nocollcb (an XLA_FLAGS child: command buffers
             without collectives) and +tuned, cutecall's first
  mlpcb   both MLP steps with command buffers off, then traced with them on
  mlpcc   the QuACK MLP step plain, command buffers off, -CUSTOM_CALL
  final   the table, FA4 with -CUSTOM_CALL, then every step +tuned
  chunks  the MLP steps in hidden chunks (+dp), both attention steps +dp
  reserve QuACK's MLP with its weight-gradient GEMMs leaving SMs to NCCL
  product the table at XLA's defaults, then every step +dp (sharded_step's options)
  persistence QuACK's MLP with non-persistent weight-gradient GEMMs (NPW, NPW1: dw1 only)
  overlap QuACK's MLP with gradient overlap (the default in shard_map) and without
  clocks  QuACK's MLP with command buffers on and off, the clocks logged
  sustained product, then QuACK's MLP in 4 gradient blocks +dp (with --equal-work)

A configuration: {model, grads, xla, gpus, trace, keep_trace, dump_hlo,
est_s}; a child: {name, impl, configs, max_s (optional), xla_flags (optional:
appended to the child's XLA_FLAGS before jax loads)}.

  python bench/scaling/suite.py --plan flags --dry-run
"""

from __future__ import annotations

import variants

ORDER = (1, 4, 2)  # the 1-GPU row first (speedups), then the one the issue is about
VARIANTS = (("one", "auto", "overlap"), ("L4", "auto", "default"), ("L4", "auto", "overlap"),
            ("one", "f32", "default"))
# The most seconds a table child may take (a hang must not eat the next
# children's time): cold FA4 and QuACK compiles included.
TABLE_MAX_S = {"fa4_cutecall": 180, "fa4_cudnn": 110, "mlp_quack": 130, "mlp_xla": 90}


def cfg(model="one", grads="auto", xla="default", gpus=1, trace=False, keep=False,
        dump=None) -> dict:
    """One configuration; `dump` (default: at 4 GPUs) keeps the optimized HLO."""
    est = 25 if model == "L4" else 12  # s: compile + timing, kernels already compiled
    return dict(model=model, grads=grads, xla=xla, gpus=gpus, trace=trace, keep_trace=keep,
                dump_hlo=gpus == 4 if dump is None else dump, est_s=est)


def _table(impl: str) -> dict:
    return dict(name=f"table-{impl}", impl=impl, max_s=TABLE_MAX_S[impl], configs=[
        cfg(gpus=n, trace=n in (1, 4), keep=n == 4) for n in ORDER])


def table() -> list[dict]:
    """The table, then the variants, cutecall first."""
    out = [_table(impl) for impl in ("fa4_cutecall", "fa4_cudnn", "mlp_quack", "mlp_xla")]
    for impl in ("fa4_cutecall", "mlp_quack", "fa4_cudnn", "mlp_xla"):
        kinds = VARIANTS if impl.startswith("fa4") else (("one", "auto", "overlap"),)
        out.append(dict(name=f"variants-{impl}", impl=impl, configs=[
            cfg(m, g, x, n, trace=n == 4 and impl == "fa4_cutecall" and g == "auto")
            for m, g, x in kinds for n in ORDER]))
    return out


def _xla_child(name: str, impl: str, kinds, max_s: float, trace4: bool = True) -> dict:
    """A child of `impl` with the XLA variants `kinds` at each GPU count
    (1-GPU rows first, then 4, then 2); the 4-GPU rows traced with `trace4`."""
    env = {variants.XLA_ENV[k] for k in kinds if k in variants.XLA_ENV}
    if len(env) > 1:
        raise ValueError(f"one child has one XLA_FLAGS: {kinds}")
    child = dict(name=name, impl=impl, max_s=max_s, configs=[
        cfg(xla=k, gpus=n, trace=trace4 and n == 4 or (n == 1 and k == "default"),
            keep=n == 4)
        for n in ORDER for k in kinds])
    if env:
        child["xla_flags"] = env.pop()
    return child


def flags() -> list[dict]:
    """Issue 35's follow-up: the MLP breakdown, the dot merger and
    command-buffer options (see the module's docstring)."""
    out = [_table("mlp_xla"), _table("mlp_quack")]
    for impl in ("fa4_cutecall", "fa4_cudnn"):
        out.append(_xla_child(f"flags-{impl}", impl, ("default", "nomerge", "tuned"),
                              TABLE_MAX_S[impl]))
    for impl in ("mlp_quack", "mlp_xla"):
        out.append(_xla_child(f"nocollcb-{impl}", impl, ("nocollcb",), 75, trace4=False))
        out.append(_xla_child(f"tuned-{impl}", impl, ("tuned",), 75))
    return out


def mlpcb() -> list[dict]:
    """Where the QuACK MLP step's loop loses against its trace (the 2-GPU
    flags run: 761 µs): both MLP steps with command buffers off (the loop as
    the profiler sees it), then traced with command buffers on; the plain
    steps first, this machine's baseline."""
    out = [_table("mlp_xla"), _table("mlp_quack")]
    for kind, trace4 in (("cboff", False), ("cbprof", True)):
        for impl in ("mlp_quack", "mlp_xla"):
            child = _xla_child(f"{kind}-{impl}", impl, (kind,), 75, trace4=trace4)
            if kind == "cbprof":  # the traced rows are the point: trace every count
                for c in child["configs"]:
                    c["trace"] = True
            out.append(child)
    return out


def mlpcc() -> list[dict]:
    """Whether keeping cutecall's calls out of XLA's command buffers
    (``-CUSTOM_CALL``) gives the QuACK MLP step what command buffers off do,
    beside the plain step and command buffers off, in one run."""
    return [_table("mlp_quack"),
            _xla_child("cboff-mlp_quack", "mlp_quack", ("cboff",), 75, trace4=False),
            _xla_child("nocustomcb-mlp_quack", "mlp_quack", ("nocustomcb",), 75, trace4=False),
            _xla_child("nocustomcb-fa4_cutecall", "fa4_cutecall", ("nocustomcb",), 110,
                       trace4=False)]


def final() -> list[dict]:
    """The issue's table after the command-buffer change (cutecall.quack's
    GEMMs outside XLA's command buffers): the four table steps, then FA4
    with cutecall's calls kept out of the command buffers (-CUSTOM_CALL),
    then both attention steps and both MLP steps with per-tensor all-reduces
    and the latency-hiding scheduler (+tuned), cutecall's first."""
    out = [_table(impl) for impl in ("fa4_cutecall", "fa4_cudnn", "mlp_quack", "mlp_xla")]
    out.append(_xla_child("nocustomcb-fa4_cutecall", "fa4_cutecall", ("nocustomcb",), 75,
                          trace4=True))
    for impl in ("fa4_cutecall", "mlp_quack", "fa4_cudnn", "mlp_xla"):
        out.append(_xla_child(f"tuned-{impl}", impl, ("tuned",), 75))
    return out


def _model_child(name: str, impl: str, models, xla: str, max_s: float) -> dict:
    """A child of `impl` with each of `models` under XLA variant `xla` at
    1/4/2 GPUs, the 4-GPU rows traced."""
    return dict(name=name, impl=impl, max_s=max_s, configs=[
        cfg(model=m, xla=xla, gpus=n, trace=n == 4, keep=n == 4) for m in models for n in ORDER])


def chunks() -> list[dict]:
    """Whether the MLP steps reach 0.95·N once their gradient all-reduce can
    overlap compute: the plain QuACK step (this machine's baseline), the
    hidden dimension in 4 and 2 chunks (variants.CHUNKS) with all-reduces
    kept apart and the latency-hiding scheduler (+dp), the same on XLA's
    dot; then both attention steps +dp (the options sharded_step uses)."""
    return [_table("mlp_quack"),
            _model_child("dp-mlp_quack", "mlp_quack", ("C4", "C2"), "dp", 120),
            _model_child("dp-mlp_xla", "mlp_xla", ("C4",), "dp", 75),
            _model_child("default-mlp_quack", "mlp_quack", ("C4",), "default", 75),
            _model_child("dp-fa4_cutecall", "fa4_cutecall", ("one",), "dp", 110),
            _model_child("dp-fa4_cudnn", "fa4_cudnn", ("one",), "dp", 75)]


def product() -> list[dict]:
    """The table at XLA's defaults, then every step compiled with the
    options ``cutecall.attention.training.sharded_step`` uses (+dp), in one
    run."""
    out = [_table(impl) for impl in ("fa4_cutecall", "fa4_cudnn", "mlp_quack", "mlp_xla")]
    return out + [_xla_child(f"dp-{impl}", impl, ("dp",), 75)
                  for impl in ("fa4_cutecall", "fa4_cudnn", "mlp_quack", "mlp_xla")]


def reserve() -> list[dict]:
    """Whether QuACK's MLP loses its overlap to its persistent GEMMs holding
    every SM (NCCL's kernel cannot start beside them): the plain step (the
    baseline), then its weight-gradient GEMMs leaving 16 SMs with NCCL held
    to 16 channels (``NCCL_MAX_NCHANNELS``), leaving 32 SMs, NCCL at 16
    channels alone, and 16 SMs alone (variants.RESERVED), each its own child."""
    nccl16 = dict(env={"NCCL_MAX_NCHANNELS": "16"}, tag="+nccl16")
    return [_table("mlp_quack"),
            dict(_model_child("R16n-mlp_quack", "mlp_quack", ("R16",), "default", 75), **nccl16),
            _model_child("R32-mlp_quack", "mlp_quack", ("R32",), "default", 75),
            dict(_model_child("n16-mlp_quack", "mlp_quack", ("one",), "default", 75), **nccl16),
            _model_child("R16-mlp_quack", "mlp_quack", ("R16",), "default", 75)]


def persistence() -> list[dict]:
    """QuACK's MLP with its weight-gradient GEMMs one CTA per tile (NPW),
    beside the plain step and XLA's dot MLP, at XLA's defaults and +dp."""
    return [_table("mlp_quack"),
            _model_child("NPW-mlp_quack", "mlp_quack", ("NPW",), "default", 90),
            _model_child("NPWdp-mlp_quack", "mlp_quack", ("NPW",), "dp", 75),
            _model_child("NPW1-mlp_quack", "mlp_quack", ("NPW1",), "default", 75),
            _table("mlp_xla")]


def overlap() -> list[dict]:
    """QuACK's MLP with gradient overlap (cutecall.quack.mlp_overlap; the
    default inside shard_map: one CTA per tile, one block -- run S ran this
    plan when the default was 4 blocks, now K4), beside the step without it
    (OV0), 2, 4 and 8 blocks, +dp, and XLA's dot MLP; then both attention
    steps."""
    return [_table("mlp_quack"),
            _model_child("K4-mlp_quack", "mlp_quack", ("K4",), "default", 75),
            _model_child("OV0-mlp_quack", "mlp_quack", ("OV0",), "default", 75),
            _model_child("K2-mlp_quack", "mlp_quack", ("K2",), "default", 75),
            _xla_child("dp-mlp_quack", "mlp_quack", ("dp",), 75),
            _table("mlp_xla"),
            _model_child("K8-mlp_quack", "mlp_quack", ("K8",), "default", 75),
            _table("fa4_cutecall"), _table("fa4_cudnn")]


def clocks() -> list[dict]:
    """Whether the loop's extra over the trace (command buffers are off
    while profiling) is command buffers: QuACK's MLP with flat weight-
    gradient GEMMs (NPW) plain and with command buffers off, the default
    step (gradient overlap) with them off, and XLA's dot MLP with them off."""
    def cboff(child):
        return dict(child, xla_flags=variants.XLA_ENV["cboff"])
    return [_model_child("NPW-mlp_quack", "mlp_quack", ("NPW",), "default", 75),
            cboff(_model_child("cboffNPW-mlp_quack", "mlp_quack", ("NPW",), "cboff", 75)),
            cboff(_model_child("cboff-mlp_quack", "mlp_quack", ("one",), "cboff", 75)),
            _xla_child("cboff-mlp_xla", "mlp_xla", ("cboff",), 75)]


def sustained() -> list[dict]:
    """The product plan, then QuACK's MLP in 4 gradient blocks +dp; run with
    ``suite.py --equal-work --trials 5`` (SUITE_ARGS): every GPU count's
    trials run as long, under the same power cap."""
    return product() + [_model_child("K4dp-mlp_quack", "mlp_quack", ("K4",), "dp", 75)]


PLANS = {"table": table, "flags": flags, "mlpcb": mlpcb, "mlpcc": mlpcc, "final": final,
         "chunks": chunks, "reserve": reserve, "product": product,
         "persistence": persistence, "overlap": overlap, "clocks": clocks,
         "sustained": sustained}


def plan(name: str = "table", max_gpus: int = 4) -> list[dict]:
    """[{name, impl, configs, max_s, xla_flags}] of plan `name`, in priority
    order. On a host of `max_gpus` < 4 GPUs the configurations above it are
    dropped, and what the 4-GPU rows trace and dump moves to `max_gpus`."""
    if name not in PLANS:
        raise ValueError(f"plan must be one of {sorted(PLANS)}, got {name!r}")
    children = PLANS[name]()
    if max_gpus >= 4:
        return children
    for child in children:
        top = {c["xla"]: c for c in child["configs"] if c["gpus"] == 4}
        kept = [c for c in child["configs"] if c["gpus"] <= max_gpus]
        for c in kept:
            if c["gpus"] == max_gpus and c["xla"] in top:
                c.update(trace=top[c["xla"]]["trace"], keep_trace=top[c["xla"]]["keep_trace"],
                         dump_hlo=True)
        child["configs"] = kept
    return [c for c in children if c["configs"]]
