"""The command line of ``bench/external/families.py`` and its report: the
output checks' verdicts (bit for bit, largest difference), every family's
JSON (``F/<family>.json``) merged into ``F.json`` and a markdown table
``F.md`` (device µs per call, the ratio of each cutecall front to the
authors' torch path, the output checks); and the run of every family at
once, a process each."""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import tempfile

from bench.harness import ROOT, module_command

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


def merge(out: str) -> int:
    """F/<family>.json files -> F.json and F.md (`out`: F.json)."""
    docs = []
    stem = os.path.splitext(out)[0]
    for path in sorted(glob.glob(os.path.join(stem, "*.json"))):
        with open(path) as f:
            docs.append(json.load(f))
    results = [r for d in docs for r in d["results"]]
    first = docs[0]["meta"] if docs else {}
    head = [f"# Kernel families against the authors' paths ({first.get('date', '?')})",
            "", f"- Device: {first.get('device')} ({first.get('nvidia_smi')})",
            f"- Versions: {json.dumps(first.get('versions', {}))}",
            f"- Families: {', '.join(d['family'] for d in docs) or 'none'}",
            "- Ratios: cutecall device time / the authors' torch path's (target <= "
            f"{TARGET}, ✗ above); JAX: {first.get('args', {}).get('k2')} calls chained in one "
            "jit keeping every output (profiler span / calls); torch: CUDA events around "
            f"{first.get('args', {}).get('launches')} launches.", ""]
    text = "\n".join(head) + "\n" + table(results) + "\n"
    tmp = stem + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"families": docs}, f, indent=1)
    os.replace(tmp, out)
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, stem + ".md")
    print(text)
    bad = [r["name"] for r in results if r.get("errors")
           or any(k.endswith("_error") for k in r.get("check", {}))]
    return 1 if bad or not results else 0


def run_all(args, families) -> int:
    """Each family of ``--families`` in a process of its own, all at once
    (they compile at the same time and take turns to time, under one lock
    file), then the merged F.json and F.md."""
    names = args.families.split(",") if args.families else sorted(families)
    fd, lock = tempfile.mkstemp(prefix="families.lock.")
    os.close(fd)
    shared = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
              if k in ("size", "budget", "margin", "trials", "rest", "k2", "chain_gib",
                       "launches", "host_launches") and v is not None]
    os.makedirs(os.path.splitext(args.out)[0], exist_ok=True)
    procs = []
    for name in names:
        log = open(os.path.join(os.path.splitext(args.out)[0], f"{name}.log"), "w")
        procs.append((name, subprocess.Popen(
            module_command("bench.external.run", "families", "--family", name, "--out",
                           args.out, "--lock", lock, *shared),
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)))
    failed = [name for name, p in procs if p.wait() != 0]
    os.unlink(lock)
    print(f"families done; failed: {failed or 'none'} (logs in {os.path.splitext(args.out)[0]})")
    return merge(args.out) or (1 if failed else 0)


def main(run_family, dry_run, families, argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.external.run families",
                                 description="kernel families through cutecall vs their "
                                             "authors' paths")
    ap.add_argument("--family", choices=sorted(families), help="one family (one process)")
    ap.add_argument("--families", help="the families run at once (default: all of "
                                       f"{','.join(sorted(families))})")
    ap.add_argument("--out", default="families.json",
                    help="F.json: the merged results; each family's in F/<family>.json")
    ap.add_argument("--merge", metavar="F.json", help="merge F/*.json into F.json and F.md")
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
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge)
    if args.dry_run:
        args.size = args.size or "test"
        return dry_run(args)
    args.size = args.size or "bench"
    if not args.family:
        return run_all(args, families)
    return run_family(args)
