"""``bench/results/scaling.md`` from the JSON ``bench/scaling/run.py``
writes: what the steps are, the latest numbers (device, versions, date,
command), one table, and where the history is."""

from __future__ import annotations

from bench.scaling import steps

NAMES = {"fa4_cutecall": "cutecall FA4", "fa4_cudnn": "XLA cuDNN attention",
         "mlp_quack": "QuACK MLP (cutecall)", "mlp_xla": "MLP on XLA's dot"}
PAIRS = (("fa4_cutecall", "fa4_cudnn"), ("mlp_quack", "mlp_xla"))
# The last commit with the scaling investigation in the tree: its plans,
# variants, per-kernel breakdowns, command-buffer profiles and per-run JSONs.
HISTORY = "00bc447"


def _speedup(r: dict) -> str:
    if "speedup" not in r:
        return ""
    s = f"{r['speedup']:.2f}×"
    return f"**{s}**" if r["speedup"] >= r["target"] else s


def cell(r: dict | None) -> str:
    """A row as a table cell: µs per step (speedup best / median trial)."""
    if r is None:
        return ""
    if "us_per_step" not in r:
        return f"error: {r.get('error', '?')[:80]}"
    if r["gpus"] == 1:
        return f"{r['us_per_step']:.0f}"
    return (f"{r['us_per_step']:.0f} ({_speedup(r)} / {r.get('speedup_median', 0):.2f}×)"
            if "speedup" in r else f"{r['us_per_step']:.0f}")


def table(rows: list[dict]) -> str:
    """A line per step; a column per (GPUs, processes)."""
    cols = sorted({(r["gpus"], r["processes"]) for r in rows}, key=lambda c: (c[0], c[1] > 1))
    by = {(r["impl"], r["gpus"], r["processes"]): r for r in rows}
    head = ["step"] + [f"{g} GPU µs" if g == 1 else
                       f"{g} GPUs, {'1 process' if p == 1 else f'{p} processes'}"
                       for g, p in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for impl in [i for i in NAMES if any(r["impl"] == i for r in rows)]:
        lines.append("| " + " | ".join([NAMES[impl]] + [cell(by.get((impl,) + c))
                                                         for c in cols]) + " |")
    return "\n".join(lines)


def reading(rows: list[dict]) -> list[str]:
    """cutecall's step against XLA's at the largest GPU count, per process layout."""
    by = {(r["impl"], r["gpus"], r["processes"]): r for r in rows if "speedup" in r}
    multi = [r for r in rows if r["gpus"] > 1 and "speedup" in r]
    met = [r for r in multi if r["speedup"] >= r["target"]]
    out = [f"- The target 0.95·N is met by {len(met)} of {len(multi)} rows of 2 or more GPUs"
           + (": " + ", ".join(f"{NAMES[r['impl']]} at {r['gpus']} ({r['processes']} "
                               f"process{'es' if r['processes'] > 1 else ''})" for r in met)
              if met else "") + "."]
    for ours, theirs in PAIRS:
        for (impl, n, p) in sorted(k for k in by if k[0] == ours):
            other = by.get((theirs, n, p))
            if n == 1 or other is None or n != max(k[1] for k in by):
                continue
            a, b = by[(impl, n, p)], other
            out.append(f"- {NAMES[ours]} against {NAMES[theirs]}, {n} GPUs, "
                       f"{'one process' if p == 1 else f'{p} processes'}: speedup "
                       f"{a['speedup']:.2f}× against {b['speedup']:.2f}×, "
                       f"{a['us_per_step']:.0f} against {b['us_per_step']:.0f} µs per step "
                       f"({b['us_per_step'] / a['us_per_step']:.3f}× as fast).")
    return out


def row_line(r: dict) -> str:
    """One row, for the log."""
    where = f"{r['gpus']} GPU(s), {r['processes']} process(es)"
    if "us_per_step" not in r:
        return f"{r['impl']:13s} {where}: {r.get('error', '?')[:300]}"
    return (f"{r['impl']:13s} {where}: {r['us_per_step']:9.1f} µs/step "
            f"(median {r['us_per_step_median']:.1f})")


def render(result: dict) -> str:
    a, m = steps.ATTENTION, steps.MLP
    v = result.get("versions", {})
    soft = ", ".join(f"{k} {v[k]}" for k in v if v[k])
    lines = [
        "# bench/scaling: data-parallel training steps at 1, 2 and 4 GPUs", "",
        "`bench/scaling/run.py` (method: its docstring): data parallel at the same global "
        "batch (weights replicated, the batch split, the loss averaged with `pmean`, "
        "XLA's defaults, command buffers on), in one process over N GPUs and with one "
        "process per GPU. The steps (`bench/scaling/steps.py`):", "",
        f"- **FA4**: `cutecall.attention.training` (projections, causal FA4 through "
        f"cutecall, squared loss, SGD) against the same model on "
        f"`jax.nn.dot_product_attention(implementation=\"cudnn\")`; B {a['batch']}, "
        f"S {a['seqlen']}, H {a['heads']}, Hkv {a['heads_kv']}, D {a['head_dim']}, "
        f"E {a['embed']}.",
        f"- **MLP**: `cutecall.quack.mlp` (QuACK's GEMMs, pinned tiles, "
        f"{steps.ACTIVATION}) against the same MLP on XLA's dot "
        f"(`cutecall.quack.mlp.xla_mlp`); tokens {m['tokens']}, d {m['d']}, "
        f"hidden {m['hidden']}.", "",
        "Time per step: a loop of the jitted step with the weights donated, as training "
        f"runs, {result.get('steps_per_gpu', 20)}·N steps per trial at N GPUs (every trial "
        "the same global batches, so as long under the GPUs' power cap), best (and median) "
        f"of {result.get('trials', 5)} trials. Speedup: the step's 1-GPU time over its "
        "N-GPU time, best / median trial; bold where it meets the target 0.95·N.", "",
        "## Latest numbers", "",
        f"- **Device:** {result.get('device')}"
        + (f" ({result['nvidia_smi'].splitlines()[0]})" if result.get("nvidia_smi") else ""),
        f"- **Software:** {soft}", f"- **Date:** {result.get('date')}",
        f"- **Command:** `{result.get('command')}`",
        "- **Raw data:** `scaling.json` (every trial, cutecall's FFI executes per step)."]
    if result.get("note"):
        lines.append(f"- **Note:** {result['note']}")
    lines += ["", "µs per step (speedup: best / median trial):", "", table(result["rows"]), ""]
    lines += reading(result["rows"])
    lines += [
        "", "## How to run", "",
        "On a 4-GPU machine (`tools/gpu/README.md`): `bash tools/gpu/gpu bench scaling` "
        "(add `SMI=1` for the GPUs' clocks and power cap during the run), or detached, "
        "`bash tools/gpu/gpu bg scaling` then `bash tools/gpu/gpu collect scaling`. Copy "
        "the JSON to `bench/results/scaling.json` and run `python -m bench.scaling.run "
        "--render bench/results/scaling.json` for this page.", "",
        "---", "",
        f"History: `git log -p -- bench/results/scaling.md`. The investigation behind "
        f"these steps (XLA option and model variants, per-kernel breakdowns per device, "
        f"command-buffer profiles, power-cap readings, one JSON per run) is in the tree "
        f"at `{HISTORY}`: `git show {HISTORY}:bench/results/scaling.md`, "
        f"`git show {HISTORY}:bench/scaling/plans.py`.", ""]
    return "\n".join(lines)
