"""What ``jax_profile.py`` reads from a trace, and its page.

Pure Python (no JAX, no GPU): a trace is a list of ``(name, start_us,
end_us)`` GPU events in time order (``timing.trace_gpu_events``, or
``torch.profiler``'s CUDA events), so the analysis is testable on the CPU.

  python bench/external/profile_report.py jaxprof.json   # re-print the page
"""

from __future__ import annotations

import json
import sys


def is_copy(name: str) -> bool:
    """Whether a GPU event is a copy or a memset rather than a kernel."""
    return name.lower().startswith(("memcpy", "memset"))


def analyze(events, k: int, sample_calls: int = 2) -> dict:
    """Per-call view of a k-call trace.

    Returns ``{"span_us", "busy_us", "idle_us", "kernels", "copies",
    "launches_per_call", "max_gap_us", "gaps_over_2us", "sample"}``: span
    from the first event's start to the last's end over k (what CUDA events
    around k launches read), busy the summed event durations over k, idle
    the summed gaps between events over k (span = busy + idle when nothing
    overlaps); ``kernels``/``copies`` list each distinct event name with its
    launches and µs per call, copies and memsets apart so an extra one
    shows; ``sample`` is the first ``sample_calls`` calls' events as
    ``(name, start offset µs, duration µs)``.
    """
    if not events:
        raise ValueError("analyze: the trace holds no GPU event")
    table: dict[str, list] = {}
    gaps, reach = [], events[0][1]
    for name, s, e in events:
        row = table.setdefault(name, [0, 0.0])
        row[0] += 1
        row[1] += e - s
        if s > reach:
            gaps.append(s - reach)
        reach = max(reach, e)
    span = max(e for _, _, e in events) - events[0][1]
    busy = sum(e - s for _, s, e in events)
    rows = [{"name": n, "launches": c / k, "us": t / k} for n, (c, t) in table.items()]
    per_call = max(1, round(len(events) / k))
    t0 = events[0][1]
    return {
        "span_us": span / k, "busy_us": busy / k, "idle_us": sum(gaps) / k,
        "kernels": [r for r in rows if not is_copy(r["name"])],
        "copies": [r for r in rows if is_copy(r["name"])],
        "launches_per_call": len(events) / k,
        "max_gap_us": max(gaps, default=0.0),
        "gaps_over_2us": sum(g > 2.0 for g in gaps) / k,
        "sample": [(short(n), round(s - t0, 2), round(e - s, 2))
                   for n, s, e in events[:per_call * sample_calls]],
    }


def host_summary(host, k: int, top: int = 12) -> list[dict]:
    """The host events of a k-call trace that took the most time, by name
    (``$``-prefixed Python frames left out): ``{"name", "per_call" (count
    over k), "mean_us", "total_us"}`` -- what XLA's thread spent per thunk
    (a custom call's launch cost shows under its HLO name).
    ``host``: (line, name, start_us, end_us)."""
    rows: dict[str, list] = {}
    for _line, name, s, e in host:
        if name.startswith("$"):
            continue
        row = rows.setdefault(name, [0, 0.0])
        row[0] += 1
        row[1] += e - s
    best = sorted(rows.items(), key=lambda kv: -kv[1][1])[:top]
    return [{"name": short(n), "per_call": c / k, "mean_us": t / c, "total_us": t}
            for n, (c, t) in best]


def short(name: str, width: int = 70) -> str:
    """A kernel name cut to `width` characters (mangled names run long)."""
    return name if len(name) <= width else name[:width - 3] + "..."


def _f(v, nd=1):
    return "—" if v is None else f"{v:.{nd}f}"


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def summary_row(r: dict) -> str:
    """One markdown table row of a case's record."""
    authors = _get(r, "interleaved", "authors_events_us", "median") or \
        _get(r, "authors_torch", "events_us")
    chain = _get(r, "interleaved", "jax_span_us", "median") or _get(r, "jax_chain", "span_us")
    wall = _get(r, "interleaved", "jax_wall_us", "median") or _get(r, "jax_chain", "wall_us")
    speed = None if not (authors and chain) else authors / chain
    cells = [
        r["name"], _f(authors), _f(_get(r, "authors_torch", "span_us")),
        _f(_get(r, "authors_torch", "busy_us")),
        _f(_get(r, "authors_torch", "rotated_us")),
        _f(chain), _f(_get(r, "jax_chain", "busy_us")), _f(_get(r, "jax_chain", "idle_us")),
        _f(wall), _f(_get(r, "jax_loop", "busy_us")),
        _f(_get(r, "jax_static", "busy_us")),
        _f(_get(r, "xla_chain", "busy_us")) + " / " + _f(_get(r, "xla_loop", "busy_us")),
        _f(_get(r, "jax_chain", "launches_per_call"), 2),
        str(len(_get(r, "jax_chain", "copies") or [])),
        _f(speed, 3), _f(None if not (authors and wall) else authors / wall, 3)]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| kernel | authors torch µs (events) | authors span (torch.profiler) | authors busy | "
    "authors, fresh outputs "
    "each call µs | JAX chain µs (span) | JAX chain busy | JAX chain idle | JAX wall | "
    "JAX loop busy (outputs freed) | JAX static busy | XLA op busy chain / loop | "
    "GPU events per JAX call | copy/memset kinds | speed (authors / JAX span) | "
    "speed (authors / JAX wall) |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def markdown(doc: dict) -> str:
    """The page: the summary table, then each case's kernels per call."""
    meta = doc.get("meta", {})
    out = ["# JAX front vs the authors' path: where the time goes", "",
           f"- device: {meta.get('device')}; jax {meta.get('jax')}, torch "
           f"{meta.get('torch')}; {meta.get('date')}; k = {meta.get('k')} calls per chain",
           "- authors torch µs, JAX chain span and wall: medians of interleaved "
           "rounds where the run made them (`interleaved` in the JSON), else one "
           "reading",
           "- authors torch µs: CUDA events around the launches on the same output "
           "buffers; 'fresh outputs': the same with k output sets in rotation, as "
           "the JAX chain (every output kept) writes k distinct buffers",
           "- JAX chain: k calls in one jit, every output a result "
           "(bench/timing.jax_chain); span / busy / idle per call from a JAX "
           "profiler trace; loop: the jitted call k times, outputs freed",
           "", HEADER]
    out += [summary_row(r) for r in doc.get("results", [])]
    for r in doc.get("results", []):
        out += ["", f"## {r['name']}", ""]
        for key in ("jax_chain", "jax_loop", "jax_static", "authors_torch", "cutecall_torch"):
            rec = r.get(key)
            if not isinstance(rec, dict) or "kernels" not in rec:
                continue
            out.append(f"- {key}: " + "; ".join(
                f"{short(k['name'], 60)} ×{k['launches']:.2f} {k['us']:.1f} µs"
                for k in rec["kernels"] + rec.get("copies", [])))
        for key, err in r.get("errors", {}).items():
            out.append(f"- error in {key}: {err[:300]}")
        for key in ("jax_chain", "jax_loop"):
            hs = (r.get(key) or {}).get("host") or []
            if hs:
                out.append(f"- {key} host (name ×per call, mean µs): " + "; ".join(
                    f"{h['name']} ×{h['per_call']:.2f} {h['mean_us']:.1f}" for h in hs[:8]))
        if "optimized_hlo_ops" in r.get("jax_chain", {}):
            out.append(f"- JAX chain's optimized HLO ops (k calls): {r['jax_chain']['optimized_hlo_ops']}")
        if "sample" in r.get("jax_chain", {}):
            out.append("- JAX chain, first calls (name, start µs, duration µs): " + ", ".join(
                f"({n}, {s}, {d})" for n, s, d in r["jax_chain"]["sample"]))
    for note in doc.get("skipped", []):
        out.append(f"- skipped: {note}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(markdown(json.load(f)))
