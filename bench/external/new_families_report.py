"""The command line of ``bench/external/new_families.py`` and its report:
the output checks' verdicts (bit for bit, largest difference), every
family's JSON (``DIR/<family>.json``) merged into ``DIR/newfam.json`` and a
markdown table ``DIR/newfam.md`` (device µs per call, the ratio of each
cutecall front to the authors' torch path, the output checks)."""

from __future__ import annotations

import argparse
import glob
import json
import os

TARGET = 1.02  # cutecall time / authors' time: at least 0.98x their speed


def compare(got, want) -> dict:
    """{"bitwise": equal as float32 (NaNs in the same places), "max_abs_diff"}."""
    import numpy as np

    from corpus_checks import as_numpy
    g, w = as_numpy(got), as_numpy(want)
    if g.shape != w.shape:
        return {"bitwise": False, "max_abs_diff": None, "shapes": [g.shape, w.shape]}
    diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
    finite = diff[np.isfinite(diff)]
    return {"bitwise": bool(np.array_equal(g, w, equal_nan=True)),
            "max_abs_diff": float(finite.max()) if finite.size else 0.0}


def summarize(pairs) -> dict:
    """One verdict over every output: bitwise iff all are, the largest diff."""
    res = [compare(g, w) for g, w in pairs]
    diffs = [r["max_abs_diff"] for r in res if r["max_abs_diff"] is not None]
    return {"bitwise": bool(res) and all(r["bitwise"] for r in res),
            "max_abs_diff": max(diffs) if diffs else None, "outputs": len(res)}


def _median(rec, path, metric="device_us"):
    v = rec.get("paths", {}).get(path, {}).get(metric)
    return v["median"] if v else None


def _fmt(v, digits=1):
    return "—" if v is None else f"{v:.{digits}f}"


def _ratio(a, b):
    return None if a is None or not b else a / b


def _check(c):
    if not c:
        return "—"
    if c["bitwise"]:
        return "bitwise"
    return f"max diff {_fmt(c['max_abs_diff'], 3)}" if c["max_abs_diff"] is not None else "shape!"


def table(results) -> str:
    """The markdown table of case records (``new_families.run_case``)."""
    lines = ["| kernel | authors torch µs | cutecall torch µs | cutecall JAX µs (busy) | "
             "torch / authors | JAX / authors | torch vs authors | JAX vs authors | "
             "host µs authors / cutecall torch | JAX chain | compiles | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        at, ct, cj = (_median(r, p) for p in ("authors_torch", "cutecall_torch",
                                             "cutecall_jax"))
        rt, rj = _ratio(ct, at), _ratio(cj, at)

        def mark(x):
            return "—" if x is None else f"{x:.3f}" + ("" if x <= TARGET else " ✗")
        check = r.get("check", {})
        failed = {**{k: v for k, v in check.items() if k.endswith("_error")},
                  **r.get("errors", {})}
        errors = "; ".join(f"{k}: {v[:120]}" for k, v in failed.items())
        lines.append(
            f"| {r['name']} | {_fmt(at)} | {_fmt(ct)} | {_fmt(cj)} "
            f"({_fmt(_median(r, 'cutecall_jax', 'busy_us'))}) | {mark(rt)} | {mark(rj)} | "
            f"{_check(check.get('torch_vs_authors'))} | {_check(check.get('jax_vs_authors'))} | "
            f"{_fmt(_median(r, 'authors_torch', 'host_us'))} / "
            f"{_fmt(_median(r, 'cutecall_torch', 'host_us'))} | {r.get('jax_chain', '—')} | "
            f"{r.get('compiles', '—')} | "
            f"{errors or '—'} |")
    return "\n".join(lines)


def merge(folder: str) -> int:
    """DIR/<family>.json files -> DIR/newfam.json and DIR/newfam.md."""
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        if os.path.basename(path) == "newfam.json":
            continue
        with open(path) as f:
            docs.append(json.load(f))
    results = [r for d in docs for r in d["results"]]
    first = docs[0]["meta"] if docs else {}
    head = [f"# issue 37's families against the authors' paths ({first.get('date', '?')})",
            "", f"- Device: {first.get('device')} ({first.get('nvidia_smi')})",
            f"- Versions: {json.dumps(first.get('versions', {}))}",
            f"- Families: {', '.join(d['family'] for d in docs) or 'none'}",
            "- Ratios: cutecall device time / the authors' torch path's (target <= "
            f"{TARGET}, ✗ above); JAX: {first.get('args', {}).get('k2')} calls chained in one "
            "jit keeping every output (profiler span / calls); torch: CUDA events around "
            f"{first.get('args', {}).get('launches')} launches.", ""]
    text = "\n".join(head) + "\n" + table(results) + "\n"
    tmp = os.path.join(folder, ".newfam.tmp")
    with open(tmp, "w") as f:
        json.dump({"families": docs}, f, indent=1)
    os.replace(tmp, os.path.join(folder, "newfam.json"))
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(folder, "newfam.md"))
    print(text)
    bad = [r["name"] for r in results if r.get("errors")
           or any(k.endswith("_error") for k in r.get("check", {}))]
    return 1 if bad or not results else 0


def main(run_family, dry_run, families) -> int:
    ap = argparse.ArgumentParser(description="issue 37's kernel families vs their authors")
    ap.add_argument("--family", choices=sorted(families), help="one family (one process)")
    ap.add_argument("--out", default="newfam", help="folder of the JSON files")
    ap.add_argument("--merge", metavar="DIR", help="merge DIR's JSON files into newfam.*")
    ap.add_argument("--dry-run", action="store_true", help="CPU: build and compile only")
    ap.add_argument("--size", default=None, choices=["bench", "test"],
                    help="corpus shapes (default: bench; test with --dry-run)")
    ap.add_argument("--lock", default=None, help="a file to flock while timing")
    ap.add_argument("--budget", type=float, default=200.0,
                    help="seconds: cases that would start later are skipped")
    ap.add_argument("--margin", type=float, default=15.0,
                    help="seconds left below which no further trial starts")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rest", type=float, default=0.3,
                    help="idle seconds before each path's timing")
    ap.add_argument("--k2", type=int, default=20, help="JAX calls chained in one jit")
    ap.add_argument("--chain-gib", type=float, default=12.0,
                    help="at most this much of kept outputs in one JAX chain")
    ap.add_argument("--launches", type=int, default=30)
    ap.add_argument("--host-launches", type=int, default=50)
    args = ap.parse_args()
    if args.merge:
        return merge(args.merge)
    if args.dry_run:
        args.size = args.size or "test"
        return dry_run(args)
    args.size = args.size or "bench"
    if not args.family:
        ap.error("--family is required (or --merge DIR, or --dry-run)")
    return run_family(args)
