"""Reading what bench/scaling/cb_profile.py's children leave: XLA's
command-buffer VLOG lines, a JAX profiler trace, an optimized-HLO dump; and
the summary page. Pure Python (the trace through ``jax.profiler``'s
ProfileData), testable on the CPU."""

from __future__ import annotations

import collections
import glob
import os
import re

# absl/glog prefix: "I1127 04:46:54.182673    7434 command_buffer_thunk.cc:123] msg"
_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+(\d+) \S+\] (.*)$")
_MARK = re.compile(r"^=== (variant|end) (\S+) ===$")
_ON_DEVICE = re.compile(r"(Initialize|Update) command buffer on device #(\d+)")
_INITIALIZED = re.compile(r"Initialized command buffer on device #(\d+) in (\d+)")
_UPDATED = re.compile(r"Updated command buffer in (\d+)")


def parse_vlog(path: str) -> dict:
    """{variant: {"initialize"|"update": {device: [count, total_us]}}} from a
    child's stderr: XLA's command_buffer_thunk VLOG(3) lines between the
    child's phase markers. {} when XLA wrote none (VLOG not honoured)."""
    out: dict = {}
    variant, thread_device = None, {}
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return out
    for raw in lines:
        m = _MARK.match(raw.strip())
        if m:
            variant = m.group(2) if m.group(1) == "variant" else None
            continue
        p = _PREFIX.match(raw)
        if not p or variant is None:
            continue
        thread, msg = p.groups()
        if (d := _ON_DEVICE.search(msg)):
            thread_device[thread] = int(d.group(2))
        if (i := _INITIALIZED.search(msg)):
            _add(out, variant, "initialize", int(i.group(1)), int(i.group(2)))
        elif (u := _UPDATED.search(msg)):
            _add(out, variant, "update", thread_device.get(thread, -1), int(u.group(1)))
    return out


def _add(out, variant, kind, device, us):
    row = out.setdefault(variant, {}).setdefault(kind, {}).setdefault(str(device), [0, 0])
    row[0] += 1
    row[1] += us


def summarize_trace(folder: str) -> dict:
    """Host spans named command_buffer::* (count, total µs, per thread) and
    each GPU's busy and span µs, from the one .xplane.pb under `folder`."""
    from jax.profiler import ProfileData
    paths = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    if not paths:
        return {"error": "no trace written"}
    host: dict = collections.defaultdict(lambda: [0, 0.0])
    gpus = {}
    for plane in ProfileData.from_file(paths[0]).planes:
        if plane.name.startswith("/device:GPU"):
            events = [(e.start_ns, e.end_ns) for ln in plane.lines
                      if ln.name.startswith("Stream") for e in ln.events]
            if events:
                gpus[plane.name] = {
                    "span_us": (max(e for _, e in events) - min(s for s, _ in events)) / 1e3,
                    "busy_us": sum(e - s for s, e in events) / 1e3}
            continue
        for ln in plane.lines:
            for e in ln.events:
                if e.name.startswith(("command_buffer::", "WARNING: CommandBuffer")):
                    row = host[f"{e.name} @ {ln.name}"]
                    row[0] += 1
                    row[1] += (e.end_ns - e.start_ns) / 1e3
    return {"host": dict(host), "gpus": gpus, "file": os.path.relpath(paths[0], folder)}


def _computations(text: str):
    """(name, body lines) of each computation in HLO text."""
    name, body = None, []
    for line in text.splitlines():
        if name is None and line and not line[0].isspace() and line.rstrip().endswith("{"):
            head = line.split()[1] if line.startswith("ENTRY ") else line.split()[0]
            name, body = head.lstrip("%"), []
        elif name is not None and line.startswith("}"):
            yield name, body
            name = None
        elif name is not None:
            body.append(line)


def count_hlo(folder: str) -> dict:
    """In the optimized HLO under `folder`: command-buffer computations, and
    custom calls (by target) inside and outside them."""
    paths = sorted(glob.glob(os.path.join(folder, "*after_optimizations.txt")))
    if not paths:
        return {"error": "no after_optimizations dump"}
    text = open(max(paths, key=os.path.getsize)).read()
    target = re.compile(r'custom_call_target="([^"]+)"')
    out = {"command_buffers": 0, "calls_in_command_buffers": {}, "calls_elsewhere": {}}
    for name, body in _computations(text):
        inside = name.startswith("command_buffer")
        out["command_buffers"] += inside
        where = out["calls_in_command_buffers" if inside else "calls_elsewhere"]
        for line in body:
            if (m := target.search(line)):
                where[m.group(1)] = where.get(m.group(1), 0) + 1
    return out


def line(r: dict) -> str:
    if "error" in r:
        return f"{r.get('impl')} {r.get('gpus')} GPU: {r['error']}"
    cells = [f"{v} cold {m['cold_us']:.0f} alt {m['alt_us']:.0f} steady {m['warm_us']:.0f}"
             f" loop {m.get('loop_us', float('nan')):.0f}"
             for v, m in r["variants"].items()]
    return f"{r['impl']} {r['gpus']} GPU: " + "; ".join(cells)


def markdown(doc: dict) -> str:
    rows = ["| impl | GPUs | variant | chain µs/step: cold | alternating | steady | loop "
            "µs/step | cutecall executes/step first / cold / alt / steady / loop | XLA record "
            "µs (init / update, all devices) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        for v, m in r.get("variants", {}).items():
            ex = " / ".join(f"{m[f'executes_per_step_{k}']:.1f}"
                            for k in ("first", "cold", "alt", "warm", "loop")
                            if f"executes_per_step_{k}" in m)
            vl = r.get("vlog", {}).get(v, {})
            rec = " / ".join(str(sum(us for _, us in vl.get(k, {}).values()))
                             for k in ("initialize", "update")) if vl else "no VLOG"
            rows.append(f"| {r['impl']} | {r['gpus']} | {v} | {m['cold_us']:.0f} | "
                        f"{m['alt_us']:.0f} | {m['warm_us']:.0f} | "
                        f"{m.get('loop_us', float('nan')):.0f} | {ex} | {rec} |")
        if "error" in r:
            rows.append(f"| {r.get('impl')} | {r.get('gpus')} | error: {r['error']} | | | | | | |")
        for v, err in r.get("errors", {}).items():
            rows.append(f"| {r['impl']} | {r['gpus']} | {v}: {err[:200]} | | | | | | |")
    extra = []
    for r in doc["results"]:
        if "hlo" in r:
            extra.append(f"- {r['impl']} {r['gpus']} GPUs, optimized HLO of a 2-step chain: "
                         f"{r['hlo']}")
        if "trace" in r:
            extra.append(f"- {r['impl']} {r['gpus']} GPUs, trace (3 executions, the first "
                         f"recording): {r['trace']}")
    return (f"# Issue 35 profile ({doc['date']})\n\nCommand: `{doc['command']}`; chains of "
            f"{doc['k1']} and {doc['k2']} steps.\n\n" + "\n".join(rows) + "\n\n"
            + "\n".join(extra) + "\n")
