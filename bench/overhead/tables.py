"""The launch-overhead benchmark's text report: the tables ``run.py``
prints from its results (the JSON's ``overhead``, ``bandwidth`` and ``meta``),
and ``synthetic_results`` (made-up numbers in the real shape, for
``--dry-run``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.overhead.config import CMDBUF_OFF, PATH_LABELS, SCENARIOS, Config
from bench.harness import Measurement
from bench.overhead.paths import Paths
from bench.report import Column, format_grid
from bench.overhead.scenarios import has_column


def column_heads(cfg: Config) -> dict[str, tuple[str, str]]:
    unrolled, fori = f"jit x{cfg.unroll}", f"fori x{cfg.fori}"
    return {
        "unrolled": (unrolled, "cmdbuf on"),
        "unrolled_donate": (unrolled, "donated"),
        "unrolled_cmdbuf_off": (unrolled, "cmdbuf off"),
        "fori": (fori, "cmdbuf on"),
        "fori_cmdbuf_off": (fori, "cmdbuf off"),
        "eager": ("eager", "dispatch"),
    }


def target_label(row: dict[str, Any]) -> str:
    return PATH_LABELS.get(row["path"], row["path"]) + ("" if row["graph"] else " [no graph]")


def format_overhead_table(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    columns = [Column(s, h, lambda m: f"{m['us_per_call']:.2f} [{m['min_us_per_call']:.2f}]")
               for s, h in column_heads(cfg).items()]
    order = "interleaved" if cfg.interleave else "in one block per path"
    title = (f"Launch overhead: empty kernel, f32[{cfg.n}] -> f32[{cfg.n}], microseconds per call, "
             f"median [min] of {cfg.trials} trials ({order})")
    footer = ["  [no graph] targets opt out of CUDA graphs (allow_cuda_graph=False / no "
              "kCmdBufferCompatible): under default flags they run as plain thunks;",
              "  '-' = not measured for them (no command buffer to turn off; the donated chain "
              "is for graph-capable targets). 'skip' = time budget spent."]
    return format_grid(title, list(overhead.values()), columns, footer, target_label)


def format_dispatch_table(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    heads = column_heads(cfg)
    columns = [Column(s, (heads[s][1], what), lambda m, f=field: f"{m[f]:.2f}")
               for s in ("unrolled", "unrolled_donate")
               for what, field in (("total", "us_per_call"), ("dispatch", "dispatch_us"))]
    title = (f"Host dispatch vs total, jit x{cfg.unroll}, graph-capable targets, "
             f"microseconds per call (medians)")
    footer = ["  dispatch = until the dispatch loop returned, before the final block. Close to "
              "total: the host sets the pace; well below: the GPU does."]
    return format_grid(title, [r for r in overhead.values() if r["graph"]], columns, footer,
                       target_label)


def format_executes_table(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    rows = [r for r in overhead.values() if r["path"] == "cutecall"]
    if not any(isinstance(m, dict) and m.get("executes_per_invocation") is not None
               for r in rows for m in r.values()):
        return "Execute counter: not recorded (cutecall._core has no call_stats())."

    def show(m: dict[str, Any]) -> str:
        if m.get("executes_per_invocation") is None:
            return "-"
        return f"{m['executes_per_invocation']:g}/{m['calls_per_invocation']}"

    columns = [Column(s, h, show) for s, h in column_heads(cfg).items()]
    title = ("cutecall execute-handler runs / calls, per invocation "
             "(cutecall._core.call_stats()['executes'] over the timed trials)")
    footer = ["  with command buffers: 0 = XLA replays the recorded graph without the handler; "
              "= calls: the handler runs on every replay."]
    return format_grid(title, rows, columns, footer, target_label)


def format_summary(overhead: dict[str, dict[str, Any]], cfg: Config) -> str:
    def ratio(s: str, ref: str, field: str) -> str:
        a = overhead.get("cutecall", {}).get(s) or {}
        b = overhead.get(ref, {}).get(s) or {}
        if a.get(field) is None or not b.get(field):
            return "n/a"
        return f"{a[field] / b[field]:.2f}x"

    heads = column_heads(cfg)
    refs = ("handwritten", "handwritten_ex")
    width = max(len(PATH_LABELS[r]) for r in refs)
    lines = [f"{'cutecall / hand-written (target <= 1.10x)':{width + 23}s} {'medians':>8s} {'mins':>8s}"]
    for s in ("unrolled", "unrolled_donate"):
        for ref in refs:
            lines.append(f"  {' '.join(heads[s]):18s} / {PATH_LABELS[ref]:{width}s}"
                         f" {ratio(s, ref, 'us_per_call'):>8s} {ratio(s, ref, 'min_us_per_call'):>8s}")
    return "\n".join(lines)


def format_bandwidth_table(bw: dict[str, Any], cfg: Config) -> str:
    lines = [f"Copy bandwidth: f32, {cfg.bw_gib:g} GiB in -> new {cfg.bw_gib:g} GiB out, "
             f"GB/s counting read + write (median of {cfg.bw_trials} trials)"]
    if "error" in bw:
        return "\n".join(lines + [f"  ERROR: {bw['error']}"])
    lines.append(f"{'path':24s} {'GB/s':>8s} {'ms/call':>9s}  check")
    for name in ("cutecall", "cutlass_jax", "xla"):
        r = bw.get(name)
        if r is None:
            continue
        label = PATH_LABELS.get(name, name)
        if "gbps" in r:
            check = "ok" if r.get("output_matches_input") else "MISMATCH"
            lines.append(f"{label:24s} {r['gbps']:8.1f} {r['ms_per_call']:9.3f}  {check}")
        else:
            lines.append(f"{label:24s} {'ERR':>8s} {'':9s}  {r.get('error')}")
    return "\n".join(lines)


def format_report(data: dict[str, Any], cfg: Config) -> str:
    """Every table, then the device (when measured), the summary last."""
    overhead, meta = data["overhead"], data["meta"]
    parts = [
        format_overhead_table(overhead, cfg),
        format_dispatch_table(overhead, cfg),
        format_executes_table(overhead, cfg),
        format_bandwidth_table(data["bandwidth"], cfg),
    ]
    if "device" in meta:
        parts.append(f"(device: {meta['device']}; {meta.get('nvidia_smi')}; wall {meta['wall_s']} s)")
    return "\n\n".join(parts + [format_summary(overhead, cfg)])


def synthetic_results(cfg: Config) -> dict[str, Any]:
    """Made-up numbers in the real shape, for ``--dry-run``."""
    overhead: dict[str, dict[str, Any]] = {}
    base = {"cutecall": 2.0, "handwritten": 1.8, "handwritten_ex": 1.9, "cutlass_jax": 2.6,
            "tvm_ffi": 3.1}
    for target in Paths(cfg).targets():
        row: dict[str, Any] = {"path": target.path, "graph": target.graph}
        for s in SCENARIOS:
            if not has_column(s, target.graph):
                continue
            graph_run = target.graph and not s.endswith(CMDBUF_OFF)
            v = base[target.path] * (1.0 if graph_run else 2.5)
            calls = cfg.unroll if s.startswith("unrolled") else cfg.fori if s.startswith("fori") else 1
            executes = None
            if target.path == "cutecall":
                executes = 0.0 if graph_run and s.startswith("unrolled") else float(calls)
            trials = [v * (1 + 0.05 * (i % 4)) for i in range(cfg.trials)]
            row[s] = dataclasses.asdict(Measurement.from_trials(
                trials, [t * (0.9 if graph_run else 0.3) for t in trials], reps=100,
                calls_per_invocation=calls, executes_per_invocation=executes))
        overhead[target.key] = row
    if "tvm_ffi" in cfg.paths:
        overhead["tvm_ffi"]["eager"] = dataclasses.asdict(Measurement.failed("ImportError: no tvm_ffi"))
    bw = {"cutecall": {"gbps": 3000.1, "ms_per_call": 0.7157, "output_matches_input": True},
          "cutlass_jax": {"error": "RuntimeError: example"},
          "xla": {"gbps": 2950.0, "ms_per_call": 0.728, "output_matches_input": True}}
    return {"meta": {"dry_run": True, "config": dataclasses.asdict(cfg)},
            "overhead": overhead, "bandwidth": bw}
