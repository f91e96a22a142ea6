"""The part ``plot`` of ``bench/attention/run.py``: figures and tables of
its results. Needs matplotlib (not a cutecall dependency) for the figures
only.

- dense and varlen: TFLOP/s against (maximum) sequence length, a panel per
  (pass, head dim, masking), a line per path; ``--png X.png`` writes the
  dense figure to X.png (``--figures dense,varlen``: the varlen one to
  X-varlen.png too);
- decode: tokens/s against the KV length, a panel per (S_q, batch), a line
  per path (``--figures decode``: X-decode.png);
- Markdown: a table per panel with every path's µs and cutecall's speed
  relative to fa4-jax and to FA4's torch path (the other path's time over
  cutecall's: above 1 means cutecall is faster); for a ``--profile`` JSON,
  each path's kernels and their µs.

  python -m bench.attention.run plot attention.json [more.json ...] --png attention.png --md tables.md
  python -m bench.attention.run plot profile.json        (the kernel tables, to stdout)
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict

PATHS = ("cutecall", "fa4_jax", "fa4_torch", "cudnn", "xla")
LABELS = {"cutecall": "cutecall (FA4 kernels, JAX)", "fa4_jax": "fa4-jax (cutejax)",
          "fa4_torch": "FA4 (torch)", "cudnn": "JAX cuDNN", "xla": "JAX XLA"}
SHORT = {"cutecall": "cutecall", "fa4_jax": "fa4-jax", "fa4_torch": "FA4 (torch)",
         "cudnn": "cuDNN", "xla": "XLA"}


def load(files):
    """(meta of the first file, rows of all, profiles of all). Rows of
    runs before the sets existed are dense."""
    rows, meta, profiles = [], None, []
    for f in files:
        with open(f) as fh:
            d = json.load(fh)
        rows += [dict(r, set=r.get("set", "dense")) for r in d.get("rows", [])]
        if "profile" in d:
            profiles.append(d["profile"])
        profiles += d.get("profiles", [])  # bench/results/attention.json keeps them
        meta = meta or {k: v for k, v in d.items() if k not in ("rows", "profile", "profiles")}
    return meta, rows, profiles


def panels(rows, which: str) -> dict:
    """{panel key: {x: {path: row}}}: dense/varlen keyed (mode, d, causal)
    with x the sequence length; decode keyed (S_q, batch) with x S_k."""
    out = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        if r["set"] != which:
            continue
        key = (r["seqlen_q"], r["batch"]) if which == "decode" else (r["mode"], r["d"], r["causal"])
        out[key][r["seqlen"]][r["path"]] = r
    return out


def title(which: str, key) -> str:
    if which == "decode":
        return f"decode, S_q={key[0]}, B={key[1]}"
    mode, d, causal = key
    return (f"{which + ', ' if which == 'varlen' else ''}"
            f"{'forward' if mode == 'fwd' else 'forward + backward'}, D={d}, "
            f"{'causal' if causal else 'not causal'}")


def ordered(which: str, ps: dict) -> list:
    if which == "decode":
        return sorted(ps)
    return sorted(ps, key=lambda k: (k[0] != "fwd", k[1], k[2]))


def plot(which: str, ps: dict, meta: dict, png: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = ordered(which, ps)
    metric = "tokens_per_s" if which == "decode" else "tflops"
    nrows = 2 if len(keys) > 1 else 1
    ncols = -(-len(keys) // nrows)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.8 * nrows),
                             sharey="row", squeeze=False)
    for ax, key in zip(axes.flat, keys):
        xs = sorted(ps[key])
        for path in PATHS:
            pts = [(x, ps[key][x][path][metric]) for x in xs
                   if metric in ps[key][x].get(path, {})]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=LABELS[path],
                        color=f"C{PATHS.index(path)}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{x // 1024}k" if x >= 1024 else str(x) for x in xs])
        ax.set_title(title(which, key), fontsize=9)
        ax.set_xlabel("KV length S_k" if which == "decode" else
                      "S (lengths drawn in [S/4, S])" if which == "varlen" else "sequence length")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("tokens/s" if which == "decode" else "TFLOP/s")
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    what = {"dense": f"{meta['tokens'] // 1024}k tokens, hidden {meta['hidden']}",
            "varlen": f"ragged lengths, {meta['tokens'] // 1024}k tokens, hidden {meta['hidden']}",
            "decode": "paged KV (cutecall, FA4 torch), plain KV (others)"}[which]
    fig.suptitle(f"Attention ({which}) on {meta['device']}, bf16, {what} ({meta['date']})")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def cell(row) -> str:
    if not row:
        return "–"
    if "us" in row:
        return f"{row['us']:.1f}"
    err = row.get("error", "").lower()
    return "OOM" if "resource_exhausted" in err or "out of memory" in err else "err"


def ratio(p: dict, other: str) -> str:
    a, b = p.get("cutecall", {}), p.get(other, {})
    return f"{b['us'] / a['us']:.3f}×" if "us" in a and "us" in b else "–"


def markdown(which: str, ps: dict) -> str:
    out = []
    us_cols = " | ".join(f"{SHORT[x]} µs" for x in PATHS)
    for key in ordered(which, ps):
        if which == "decode":
            head = (f"| S_k | {us_cols} | cutecall tokens/s | cutecall KV GB/s "
                    "| vs fa4-jax | vs FA4 (torch) |")
        else:
            first = "S ≤ (seqs, max)" if which == "varlen" else "S"
            head = f"| {first} | {us_cols} | cutecall TFLOP/s | vs fa4-jax | vs FA4 (torch) |"
        out += [f"### {title(which, key)}", "", head, "|" + "---|" * head.count(" | ") + "---|"]
        for x in sorted(ps[key]):
            p = ps[key][x]
            c = p.get("cutecall", {})
            if which == "decode":
                first, own = str(x), (f"{c['tokens_per_s']:.3g} | {c['kv_gbps']:.0f}"
                                      if "us" in c else "– | –")
            else:
                r = next(iter(p.values()))
                first = f"{x} ({r['batch']}, {r['max_seqlen']})" if which == "varlen" else str(x)
                own = f"{c['tflops']:.0f}" if "us" in c else "–"
            cells = " | ".join(cell(p.get(path)) for path in PATHS)
            out.append(f"| {first} | {cells} | {own} | {ratio(p, 'fa4_jax')} "
                       f"| {ratio(p, 'fa4_torch')} |")
        out.append("")
    return "\n".join(out)


def profile_markdown(prof: dict) -> str:
    s = prof["shape"]
    out = [f"### Kernels: D={s['d']}, S={s['seqlen']}, B={s['batch']}, H={s['heads']}, "
           f"{'causal' if s['causal'] else 'not causal'}, {prof['mode']}", ""]
    for path, t in prof["paths"].items():
        if "error" in t:
            out += [f"**{SHORT.get(path, path)}**: {t['error']}", ""]
            continue
        out += [f"**{SHORT.get(path, path)}**: span {t['span_us']:.1f} µs, kernels busy "
                f"{t['busy_us']:.1f} µs; "
                + "; ".join(f"{k}: `{v}`" for k, v in t.get("config", {}).items()), "",
                "| kernel | launches | µs per call |", "|---|---|---|"]
        out += [f"| `{k['name'][:110]}` | {k['launches']:g} | {k['us']:.1f} |"
                for k in t["kernels"]]
        out.append("")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.attention.run plot",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--png", help="the dense figure; the others of --figures beside it")
    ap.add_argument("--figures", default="dense", help="of dense,varlen,decode")
    ap.add_argument("--md")
    args = ap.parse_args(argv)
    meta, rows, profiles = load(args.files)
    text = []
    for which in ("dense", "varlen", "decode"):
        ps = panels(rows, which)
        if not ps:
            continue
        if args.png and which in args.figures.split(","):
            stem, ext = os.path.splitext(args.png)
            plot(which, ps, meta, args.png if which == "dense" else f"{stem}-{which}{ext}")
        text.append(f"## {which}\n\n" + markdown(which, ps))
    text += [profile_markdown(p) for p in profiles]
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(text))
    else:
        print("\n".join(text))

