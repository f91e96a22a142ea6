#!/usr/bin/env python3
"""bench/results/scaling.md from scaling.json (bench/scaling/run.py writes
both; run this to re-render after editing the JSON or the notes):

  python bench/scaling/page.py bench/results/scaling.json [--profile profile.json]
"""

from __future__ import annotations

import json
import os
import sys

NAMES = {"fa4_cutecall": "cutecall FA4", "fa4_cudnn": "XLA cuDNN attention",
         "mlp_quack": "QuACK MLP (cutecall)", "mlp_xla": "MLP on XLA's dot"}


def table(rows) -> str:
    lines = ["| step | GPUs | processes | µs/step (loop) | speedup | target | "
             "chain µs/step: cold / alternating / steady | cutecall executes/step "
             "(chain cold / alt / steady; loop) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (list(NAMES).index(r["impl"])
                                         if r["impl"] in NAMES else 9, r.get("processes", 1),
                                         r["gpus"])):
        if "error" in r:
            lines.append(f"| {NAMES.get(r['impl'], r['impl'])} | {r['gpus']} | "
                         f"{r['processes']} | error: {r['error'][:120]} | | | | |")
            continue
        sp = f"{r['speedup']:.2f}×" if "speedup" in r else ""
        ok = ""
        if "speedup" in r and r["gpus"] > 1:
            ok = f"≥ {r['target']:.2f}× " + ("met" if r["speedup"] >= r["target"] else "**missed**")
        ex = " / ".join(f"{r[k]:.1f}" for k in ("executes_per_step_cold",
                        "executes_per_step_alt", "executes_per_step_warm") if k in r)
        if "executes_per_step_loop" in r:
            ex += f"; {r['executes_per_step_loop']:.1f}"
        chain = " / ".join(f"{r.get(f'chain_{k}_us_per_step', float('nan')):.0f}"
                           for k in ("cold", "alt", "steady"))
        lines.append(f"| {NAMES.get(r['impl'], r['impl'])} | {r['gpus']} | {r['processes']} | "
                     f"{r['us_per_step']:.0f} | {sp} | {ok} | {chain} | {ex} |")
    return "\n".join(lines)


def versus(rows) -> str:
    """cutecall's speedup against XLA's at the same GPU count."""
    by = {(r["impl"], r["gpus"], r.get("processes", 1)): r for r in rows if "speedup" in r}
    out = []
    for ours, theirs in (("fa4_cutecall", "fa4_cudnn"), ("mlp_quack", "mlp_xla")):
        for n, p in sorted({(g, p) for _, g, p in by}):
            if (ours, n, p) in by and (theirs, n, p) in by and n > 1:
                a, b = by[ours, n, p]["speedup"], by[theirs, n, p]["speedup"]
                how = "one process" if p == 1 else f"{p} processes"
                out.append(f"- {NAMES[ours]} at {n} GPUs ({how}): {a:.2f}× against "
                           f"{NAMES[theirs]}'s {b:.2f}× "
                           f"({'at least' if a >= b else '**below**'} XLA's).")
    return "\n".join(out)


def render(result: dict, profile: str | None = None) -> str:
    rows = result["rows"]
    a = result.get("args", {})
    return f"""# Scaling past one GPU (issue 35)

`bench/scaling/run.py`: data-parallel training steps in one process over 1, 2
and 4 GPUs (``shard_map``, the batch split, the loss averaged with ``pmean``)
at the same global batch; the steps are in `bench/scaling/steps.py`:
FA4 through cutecall against the same model on XLA's cuDNN attention
(B 16, S 4096, H 16, Hkv 4, D 128, E 2048, causal), and QuACK's MLP through
cutecall against the same MLP on XLA's dot (tokens 16384, d 4096, hidden
11008, gelu_tanh_approx, pinned tiles).

- Device: {result['device']} (`nvidia-smi`: {result.get('nvidia_smi')}).
- Versions: {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.
- Date: {result['date']}.
- Command: `{result['command']}`; command buffers {a.get('command_buffers', 'on')}.
- Timing: µs/step is a Python loop of the jitted step with the weights donated (how
  training runs), {a.get('trials')} trials of 20 steps after 3, best. The chain columns are
  the harness of the first numbers (`bench/timing.jax_wall_us`): the difference of
  {a.get('k2')}- and {a.get('k1')}-step chains of independent steps in one executable;
  cold = their second executions alternating short and long, alternating = the same
  after {a.get('warm')} more, steady = each chain run several times in a row.
  cutecall executes/step: runs of cutecall's FFI handler per step, all devices
  together (it runs only while XLA records a graph; without command buffers, once per
  call).

{table(rows)}

{versus(rows)}

## What the profile showed and what changed

{profile or '(see /work/notes/issue35_profile.md and bench/scaling/cb_profile.py; filled in by the device run)'}
"""


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    result = json.load(open(path))
    profile = None
    if "--profile" in sys.argv:
        profile = open(sys.argv[sys.argv.index("--profile") + 1]).read()
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), "scaling.md"), "w") as f:
        f.write(render(result, profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
