"""Tables of the part ``losses`` (bench/external/losses.py): time per path
against the authors', and where each path's time goes (its GPU events with
their launch configuration).

    python -m bench.external.run losses --report L.json   (the tables of a run)
"""

from __future__ import annotations

AUTHORS = "authors_torch"
ORDER = ("authors_torch", "cutecall_torch", "cutecall_torch_static", "cutecall_jax",
         "cutecall_jax_static", "cutecall_jax_feed", "xla")


def _get(rec, path, key):
    v = rec["paths"].get(path, {}).get(key)
    return None if v is None else v["median"]


def _fmt(v) -> str:
    return "—" if v is None else f"{v:.1f}"


def _speed(authors, ours) -> str:
    """Speed relative to the authors (authors' time / ours: above 1 faster)."""
    return "—" if authors is None or not ours else f"{authors / ours:.2f}x"


def table(results) -> str:
    """Per case and path: µs per call (CUDA-event span in torch, trace span
    in JAX), busy µs (kernels only), speed against the authors' by each, host
    µs of a torch launch."""
    lines = ["| case | path | µs per call | busy µs | speed vs authors | busy speed vs "
             "authors | host µs |", "|---|---|---|---|---|---|---|"]
    for rec in results:
        a_span, a_busy = _get(rec, AUTHORS, "device_us"), _get(rec, AUTHORS, "busy_us")
        for path in ORDER:
            if path not in rec["paths"] and path not in rec["errors"]:
                continue
            if path in rec["errors"] and path not in rec["paths"]:
                lines.append(f"| {rec['name']} | {path} | error: "
                             f"{rec['errors'][path][:120]} | | | | |")
                continue
            span = _get(rec, path, "device_us") or _get(rec, path, "span_us")
            busy = _get(rec, path, "busy_us")
            lines.append(f"| {rec['name']} | {path} | {_fmt(span)} | {_fmt(busy)} | "
                         f"{_speed(a_span, span)} | {_speed(a_busy, busy)} | "
                         f"{_fmt(_get(rec, path, 'host_us'))} |")
    return "\n".join(lines)


def rows(results) -> list[dict]:
    """One row per case and path, ``{"path": "<case> <path>", "us": µs per
    call, "busy_us": ...}``: the shape ``tools/gpu/gpu ab`` tabulates."""
    out = []
    for rec in results:
        case = rec["name"].split("[")[0]
        for path in ORDER:
            span = _get(rec, path, "device_us") or _get(rec, path, "span_us")
            if span is not None:
                out.append({"path": f"{case} {path}", "us": round(span, 2),
                            "busy_us": round(_get(rec, path, "busy_us") or 0, 2)})
    return out


def events_table(results) -> str:
    """Per case and path, every GPU event per call: launches, µs, launch
    configuration (grid, block, registers, as the profiler reports it)."""
    lines = ["| case | path | event | per call | µs | configuration |",
             "|---|---|---|---|---|---|"]
    for rec in results:
        for path in ORDER:
            for e in rec.get("events", {}).get(path, []):
                config = "; ".join(f"{k}={v}" for k, v in e.get("config", {}).items())
                lines.append(f"| {rec['name']} | {path} | {e['name'][:60]} | "
                             f"{e['launches']:.2f} | {e['us']:.1f} | {config[:160]} |")
    return "\n".join(lines)


def report(path: str) -> int:
    import json
    with open(path) as f:
        data = json.load(f)
    if "device_code" in data:
        from bench.external.device_code import table as code_table
        print(code_table(data["device_code"]))
        return 0
    print(table(data["results"]))
    print()
    print(events_table(data["results"]))
    return 0
