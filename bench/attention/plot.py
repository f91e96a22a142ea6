#!/usr/bin/env python3
"""Figure and tables of ``bench/attention/run.py`` results: TFLOP/s against
sequence length, one panel per (pass, head dim, masking), a line per path;
and a Markdown table per panel with cutecall's speed relative to FA4's own
path. Needs matplotlib (not a cutecall dependency).

  python bench/attention/plot.py a.json [b.json ...] --png out.png --md out.md
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

PATHS = ("cutecall", "fa4_torch", "cudnn", "xla")
LABELS = {"cutecall": "cutecall (FA4 kernels, JAX)", "fa4_torch": "FA4 (torch)",
          "cudnn": "JAX cuDNN", "xla": "JAX XLA"}


def load(files):
    rows, meta = [], None
    for f in files:
        d = json.load(open(f))
        rows += d["rows"]
        meta = meta or {k: v for k, v in d.items() if k != "rows"}
    panels = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        panels[(r["mode"], r["d"], r["causal"])][r["seqlen"]][r["path"]] = r
    return meta, panels


def title(mode, d, causal):
    return f"{'forward' if mode == 'fwd' else 'forward + backward'}, D={d}, " \
           f"{'causal' if causal else 'not causal'}"


def plot(panels, meta, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = sorted(panels, key=lambda k: (k[0] != "fwd", k[1], k[2]))
    fig, axes = plt.subplots(2, len(keys) // 2, figsize=(4.2 * len(keys) // 2, 7.5),
                             sharey="row")
    for ax, key in zip(axes.flat, keys):
        seqlens = sorted(panels[key])
        for path in PATHS:
            ys = [panels[key][s].get(path, {}).get("tflops") for s in seqlens]
            pts = [(s, y) for s, y in zip(seqlens, ys) if y is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=LABELS[path])
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqlens, [f"{s // 1024}k" for s in seqlens])
        ax.set_title(title(*key), fontsize=9)
        ax.set_xlabel("sequence length")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("TFLOP/s")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"Attention on {meta['device']}, bf16, {meta['tokens'] // 1024}k tokens, "
                 f"hidden {meta['hidden']} ({meta['date']})")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def markdown(panels) -> str:
    out = []
    for key in sorted(panels, key=lambda k: (k[0] != "fwd", k[1], k[2])):
        out += [f"### {title(*key)}", "",
                "| S | cutecall µs | FA4 (torch) µs | cuDNN µs | XLA µs | cutecall TFLOP/s "
                "| cutecall vs FA4 |", "|---|---|---|---|---|---|---|"]
        for s in sorted(panels[key]):
            p = panels[key][s]
            us = [f"{p[x]['us']:.1f}" if "us" in p.get(x, {}) else "OOM" for x in PATHS]
            ratio = p["fa4_torch"]["us"] / p["cutecall"]["us"]
            out.append(f"| {s} | {' | '.join(us)} | {p['cutecall']['tflops']:.0f} "
                       f"| {ratio:.3f}× |")
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--png")
    ap.add_argument("--md")
    args = ap.parse_args()
    meta, panels = load(args.files)
    if args.png:
        plot(panels, meta, args.png)
    text = markdown(panels)
    if args.md:
        open(args.md, "w").write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
