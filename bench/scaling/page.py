#!/usr/bin/env python3
"""bench/results/scaling.md from scaling.json (bench/scaling/suite.py or
run.py writes both; run this to re-render after copying the JSON over, with
the notes on what the profile showed and what changed):

  python bench/scaling/page.py bench/results/scaling.json [--profile notes.md] [--out page.md]

(default --out: scaling.md next to the JSON)
"""

from __future__ import annotations

import json
import os
import sys

NAMES = {"fa4_cutecall": "cutecall FA4", "fa4_cudnn": "XLA cuDNN attention",
         "mlp_quack": "QuACK MLP (cutecall)", "mlp_xla": "MLP on XLA's dot"}
MODELS = {"_L4": ", 4 layers", "_C2": ", hidden in 2 chunks", "_C4": ", hidden in 4 chunks",
          "_NPW": ", weight-gradient GEMMs non-persistent, no blocks",
          "_NPW1": ", dw1 non-persistent, no blocks",
          "_OV0": ", no gradient overlap", "_K2": ", gradient overlap in 2 blocks",
          "_K4": ", gradient overlap in 4 blocks",
          "_K8": ", gradient overlap in 8 blocks",
          "_R16": ", weight-gradient GEMMs leave 16 SMs", "_R32": ", weight-gradient GEMMs leave 32 SMs"}
SUFFIXES = {"+bf16grad": ", bf16 gradient pmean",
            "+f32grad": ", f32 gradient pmean",
            "+overlap": ", per-tensor all-reduce + latency-hiding scheduler",
            "+nomerge": ", DotMerger off", "+tuned": ", DotMerger off + overlap + early start",
            "+nocollcb": ", command buffers without collectives",
            "+cboff": ", command buffers off", "+cbprof": ", traced with command buffers on",
            "+nocustomcb": ", command buffers without custom calls",
            "+dp": ", sharded_step's options"}


def label(impl: str) -> str:
    """fa4_cutecall_L4+overlap -> 'cutecall FA4, 4 layers, per-tensor ...'."""
    base = next((b for b in NAMES if impl.startswith(b)), None)
    if base is None:
        return impl
    rest, out = impl[len(base):], NAMES[base]
    out += MODELS.get(rest.split("+")[0], "")
    for s, text in SUFFIXES.items():
        if s in rest:
            out += text
    return out


def _key(r):
    base = next((i for i, b in enumerate(NAMES) if r["impl"].startswith(b)), 9)
    return (base, r["impl"], r.get("processes", 1), r["gpus"])


def _verdict(r) -> str:
    if "speedup" not in r or r["gpus"] == 1:
        return ""
    target = r.get("target", 0.95 * r["gpus"])
    return f"≥ {target:.2f}× " + ("met" if r["speedup"] >= target else "**missed**")


def table(rows) -> str:
    """The rows {impl, gpus, processes, us_per_step, speedup}; the chain
    and execute-count columns where run.py measured them."""
    chains = any("chain_cold_us_per_step" in r for r in rows)
    head = "| step | GPUs | processes | µs/step (loop) | speedup | target |"
    if chains:
        head += " chain µs/step: cold / alternating / steady |"
    colls = any("collectives" in r for r in rows)
    if colls:
        head += " collectives/step (optimized HLO) |"
    ops = any("hlo_ops" in r for r in rows)
    if ops:
        head += " concatenate / slice / copy fusions (MB) |"
    head += " cutecall executes/step |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in sorted(rows, key=_key):
        cells = [label(r["impl"]), str(r["gpus"]), str(r.get("processes", 1))]
        if "error" in r:
            cells += [f"error: {r['error'][:160]}", "", ""]
        else:
            cells += [f"{r['us_per_step']:.0f}" + (" †" if r.get("warm_running") else ""),
                      f"{r['speedup']:.2f}×" if "speedup" in r else "", _verdict(r)]
        if chains:
            cells.append(" / ".join(f"{r.get(f'chain_{k}_us_per_step', float('nan')):.0f}"
                                    for k in ("cold", "alt", "steady")))
        if colls:
            c = r.get("collectives") or {}
            cells.append(("none" if not c["count"] else f"{c['count']}: {c['bytes'] / 1e6:.2f}"
                          " MB " + "+".join(c["dtypes"])) if "count" in c
                         else c.get("error", "")[:60])
        if ops:
            cells.append(_ops_cell(r))
        ex = " / ".join(f"{r[k]:.1f}" for k in ("executes_per_step_cold",
                        "executes_per_step_alt", "executes_per_step_warm") if k in r)
        if "executes_per_step_loop" in r:
            ex += ("; " if ex else "") + f"loop {r['executes_per_step_loop']:.1f}"
        cells.append(ex)
        lines.append("| " + " | ".join(cells) + " |")
    if any(r.get("warm_running") for r in rows):
        lines.append("\n† timed while QuACK's GEMMs compiled in the background (niced, "
                     "CPU only: `suite_child.py --warm-quack`).")
    return "\n".join(lines)


def _ops_cell(r) -> str:
    """The optimized HLO's copying fusions (breakdown.hlo_ops) and dropped options."""
    o = r.get("hlo_ops") or {}
    cell = (" / ".join(f"{o[k][0]} ({o[k][1] / 1e6:.1f})" for k in ("concatenate", "slice", "copy"))
            if "fusions" in o else o.get("error", "")[:60])
    if r.get("options_dropped"):
        cell += " (dropped: " + ", ".join(r["options_dropped"]) + ")"
    return cell


def versus(rows) -> str:
    """cutecall's speedup against XLA's at the same GPU count."""
    by = {(r["impl"], r["gpus"], r.get("processes", 1)): r for r in rows if "speedup" in r}
    out = []
    for ours, theirs in (("fa4_cutecall", "fa4_cudnn"), ("mlp_quack", "mlp_xla")):
        for impl, n, p in sorted(by):
            if not impl.startswith(ours) or n == 1:
                continue
            other = (theirs + impl[len(ours):], n, p)
            if other in by:
                a, b = by[impl, n, p]["speedup"], by[other]["speedup"]
                how = "one process" if p == 1 else f"{p} processes"
                out.append(f"- {label(impl)} at {n} GPUs ({how}): {a:.2f}× "
                           f"({by[impl, n, p]['us_per_step']:.0f} µs) against "
                           f"{label(other[0])}'s {b:.2f}× ({by[other]['us_per_step']:.0f} µs) "
                           f"({'at least' if a >= b else '**below**'} XLA's).")
    return "\n".join(out)


def row_line(r) -> str:
    """One row as a line of the run's log."""
    if "error" in r:
        return f"{r['impl']:40s} {r['gpus']} GPU  error: {r['error'][:200]}"
    return (f"{r['impl']:40s} {r['gpus']} GPU  {r['us_per_step']:9.1f} us/step"
            f"  (compile {r.get('compile_s', '?')} s, row {r.get('seconds', '?')} s)")


def _plain(r) -> bool:
    return r.get("model", "one") == "one" and r.get("grads", "auto") == "auto" \
        and r.get("xla", "default") == "default"


def summary(result) -> str:
    """The tables alone (what device_run.sh prints)."""
    import breakdown
    rows = result["rows"]
    parts = ["## The table\n", table([r for r in rows if _plain(r)]), "", versus(rows)]
    var = [r for r in rows if not _plain(r)]
    if var:
        parts += ["\n## Variants\n", table(var)]
    if result.get("breakdown"):
        parts += ["\n## GPU time per step and device (µs, the devices' mean)\n",
                  breakdown.markdown(result["breakdown"])]
    if result.get("skipped"):
        parts += ["\n## Skipped\n", "\n".join(
            f"- {s['impl']} at {s['gpus']} GPUs: {s['skipped']}" for s in result["skipped"])]
    return "\n".join(parts) + "\n"


def render(result: dict, profile: str | None = None) -> str:
    a = result.get("args", {})
    how = ("`bench/scaling/suite.py` (each step a child process, XLA options per compile, "
           "`bench/scaling/variants.py`)" if result.get("suite") else "`bench/scaling/run.py`")
    return f"""# Scaling past one GPU (issue 35)

{how}: data-parallel training steps in one process over 1, 2 and 4 GPUs
(`shard_map`, the batch split, the loss averaged with `pmean`) at the same
global batch; the steps are in `bench/scaling/steps.py`: FA4 through cutecall
against the same model on XLA's cuDNN attention (B 16, S 4096, H 16, Hkv 4,
D 128, E 2048, causal), and QuACK's MLP through cutecall against the same MLP
on XLA's dot (tokens {a.get('mlp_tokens', 32768)}, d 4096, hidden 11008,
gelu_tanh_approx, pinned tiles). Speedup: the row's 1-GPU time
over its N-GPU time; target 0.95·N.

- Device: {result.get('device')} (`nvidia-smi`: {result.get('nvidia_smi')}).
- Versions: {', '.join(f'{k} {v}' for k, v in result.get('versions', {}).items())}.
- Date: {result.get('date')}.
- Command: `{result.get('command')}`; command buffers on (XLA's default).
- Timing: µs/step is a Python loop of the jitted step with the weights donated (how
  training runs), {a.get('trials')} trials of {a.get('steps', 20)} steps after 3, best.
  The breakdown is a JAX profiler trace of {a.get('trace_steps', 'a few')} such steps
  (XLA runs its command buffers' thunks one by one while tracing), read with
  `jax.profiler.ProfileData` (`bench/scaling/breakdown.py`).
- Variants (`bench/scaling/variants.py`): *per-tensor all-reduce + latency-hiding
  scheduler* = XLA options `xla_gpu_all_reduce_combine_threshold_bytes=1`,
  `xla_gpu_enable_latency_hiding_scheduler=true` for that compile; *4 layers* = four
  blocks of (q/k/v projections, attention, out-projection, residual) at the same
  sizes; *f32 gradient pmean* = each device's float32 gradient averaged with
  `pmean` (JAX's own psum is at the weights' bfloat16 cast); *DotMerger off* =
  `xla_gpu_dot_merger_threshold_mb=0`; *+ overlap + early start* = that, the overlap
  options and `xla_gpu_experimental_collective_start_as_early_as_possible` (dropped,
  and said so, where the jaxlib lacks it); *command buffers without collectives* =
  `XLA_FLAGS=--xla_gpu_enable_command_buffer=-COLLECTIVES` (XLA's default types
  but collectives). Collectives/step: count, bytes and dtypes of the all-reduces in
  the step's optimized HLO; concatenate / slice / copy fusions: the fusions of that
  HLO that only copy (count, MB written).

{summary(result)}
## What the profile showed and what changed

{profile or '(filled in from the run: bench/scaling/page.py --profile notes.md)'}
"""


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        return 2
    path = sys.argv[1]
    result = json.load(open(path))
    profile = None
    if "--profile" in sys.argv:
        profile = open(sys.argv[sys.argv.index("--profile") + 1]).read()
    out = (sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv
           else os.path.join(os.path.dirname(os.path.abspath(path)), "scaling.md"))
    with open(out, "w") as f:
        f.write(render(result, profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
