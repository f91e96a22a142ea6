"""Per-kernel GPU time of a traced training step (bench/scaling/suite.py),
from a JAX profiler trace read with jax's own ``jax.profiler.ProfileData``.

Each GPU's kernels and copies (the trace's "Stream" lines of its
``/device:GPU:N`` plane) are grouped by name (:data:`GROUPS`, first match
wins) and summed per step; beside the groups, per step and device:

  span_us      first event's start to last event's end, over the traced steps
  busy_us      the union of all events (streams overlap: NCCL runs on its own)
  idle_us      span - busy: the GPU waits (host, launch gaps, other devices)
  comm_exposed_us  busy - the union of the non-collective events: collective
                   time nothing else runs beside

XLA runs its command buffers as plain thunks while the profiler is on (unless
``xla_enable_command_buffers_during_profiling``), so each kernel shows up by
name. The host side (:func:`host_events`: the runtime's events and the CUDA
driver calls, summed by name per step) comes along.
"""

from __future__ import annotations

import glob
import os
import re

GROUPS = (
    ("attn_bwd", re.compile(r"(flash|fmha|sdpa|attention|attn).*(bwd|backward|bprop|dq|dkdv|"
                            r"postprocess|preprocess)|(bwd|backward|bprop).*(flash|fmha|sdpa|"
                            r"attention|attn)", re.I)),
    ("attn_fwd", re.compile(r"flash|fmha|sdpa|attention|attn", re.I)),
    ("collective", re.compile(r"nccl|all[-_]?reduce|reduce[-_]?scatter|all[-_]?gather|"
                              r"collective", re.I)),
    ("memcpy", re.compile(r"memcpy|memset|copy_kernel", re.I)),
    ("gemm", re.compile(r"gemm|nvjet|xmma|cublas|cutlass|wgmma|matmul|sm90_|dot", re.I)),
)
OTHER = "fusion"  # XLA's fusions and elementwise kernels
ORDER = ("attn_fwd", "attn_bwd", "gemm", "collective", OTHER, "memcpy")


def group(name: str) -> str:
    for g, pattern in GROUPS:
        if pattern.search(name):
            return g
    return OTHER


def _union_ns(spans) -> int:
    total, end = 0, None
    for s, e in sorted(spans):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def summarize_events(events, steps: int) -> dict:
    """events: (name, start_ns, end_ns) of one device -> µs per step by
    group, span, busy, idle, exposed collective time, top kernels."""
    if not events:
        return {"error": "no events"}
    per, names = {g: 0 for g in ORDER}, {}
    for name, s, e in events:
        g = group(name)
        per[g] += e - s
        key = (name[:110], g)
        names[key] = names.get(key, 0) + e - s
    spans = [(s, e) for _, s, e in events]
    busy = _union_ns(spans)
    compute = _union_ns([(s, e) for n, s, e in events if group(n) != "collective"])
    span = max(e for _, e in spans) - min(s for s, _ in spans)
    us = 1e-3 / steps
    top = sorted(names.items(), key=lambda kv: -kv[1])[:15]
    return {"groups_us": {g: round(v * us, 1) for g, v in per.items()},
            "span_us": round(span * us, 1), "busy_us": round(busy * us, 1),
            "idle_us": round((span - busy) * us, 1),
            "comm_exposed_us": round((busy - compute) * us, 1),
            "kernels_per_step": round(len(events) / steps, 1),
            "top": [{"name": n, "group": g, "us": round(v * us, 1)} for (n, g), v in top]}


def device_events(data, plane_prefix: str = "/device:GPU", line_prefix: str = "Stream"):
    """{plane name: [(name, start_ns, end_ns)]} of a ProfileData."""
    out = {}
    for plane in data.planes:
        if not plane.name.startswith(plane_prefix):
            continue
        ev = [(e.name, e.start_ns, e.end_ns) for ln in plane.lines
              if ln.name.startswith(line_prefix) for e in ln.events]
        if ev:
            out[plane.name] = ev
    return out


def host_events(data, steps: int, top: int = 30) -> dict:
    """The host side of a ProfileData: the runtime's events (XLA, PjRt,
    command buffers; Python frames left out) and the CUDA driver calls
    (cu*), each summed by name over all threads, per step, the `top` longest."""
    sums: dict = {}
    for plane in data.planes:
        if plane.name.startswith("/host"):
            for ln in plane.lines:
                for e in ln.events:
                    if not e.name.startswith("$"):
                        t = sums.setdefault(e.name[:120], [0, 0])
                        t[0] += 1
                        t[1] += e.end_ns - e.start_ns

    def rows(items):
        best = sorted(items, key=lambda kv: -kv[1][1])[:top]
        return [{"name": k, "count": round(c / steps, 1), "us": round(ns / 1e3 / steps, 1)}
                for k, (c, ns) in best]
    return {"runtime": rows(sums.items()),
            "driver": rows([kv for kv in sums.items() if kv[0].startswith("cu")])}


def summarize_trace(folder: str, steps: int, **prefixes) -> dict:
    """{"devices": {plane: summary}, "mean": summary of the device means}
    for the one .xplane.pb under `folder`, `steps` steps traced."""
    from jax.profiler import ProfileData
    paths = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    if not paths:
        return {"error": "no trace written"}
    data = ProfileData.from_file(paths[0])
    devices = {p: summarize_events(ev, steps)
               for p, ev in sorted(device_events(data, **prefixes).items())}
    good = [d for d in devices.values() if "error" not in d]
    if not good:
        return {"error": f"no device events in {os.path.basename(paths[0])}",
                "host": host_events(data, steps)}
    keys = ("span_us", "busy_us", "idle_us", "comm_exposed_us", "kernels_per_step")
    mean = {k: round(sum(d[k] for d in good) / len(good), 1) for k in keys}
    mean["busy_max_us"] = max(d["busy_us"] for d in good)
    mean["groups_us"] = {g: round(sum(d["groups_us"][g] for d in good) / len(good), 1)
                         for g in ORDER}
    first = next(iter(devices))
    return {"steps": steps, "mean": mean, "top": devices[first].get("top", []),
            "host": host_events(data, steps),
            "devices": {p: {k: v for k, v in d.items() if k != "top"}
                        for p, d in devices.items()}}


_COLLECTIVE = re.compile(r"=\s*(.*?)\s(all-reduce|all-reduce-start|reduce-scatter|all-gather|"
                         r"all-gather-start|collective-permute|collective-permute-start)\(")
_ARRAY = re.compile(r"\b(pred|[sfu]\d+|bf16)\[([\d,]*)\]")
_BYTES = {"pred": 1, "bf16": 2}


def collectives(hlo_text: str) -> dict:
    """{"count", "bytes", "dtypes"} of the collectives in an executable's
    optimized HLO (``compiled.as_text()``): what the step sends, once per
    step (an async pair counts once, at its start)."""
    count, total, dtypes = 0, 0, {}
    for m in _COLLECTIVE.finditer(hlo_text):
        count += 1
        arrays = _ARRAY.findall(m.group(1))  # the result: one array or a tuple
        if m.group(2).endswith("-start"):  # ((operands), results): the results only
            arrays = arrays[len(arrays) // 2:]
        for dt, dims in arrays:
            size = _size(f"{dt}[{dims}]")
            total += size
            dtypes[dt] = dtypes.get(dt, 0) + size
    return {"count": count, "bytes": total, "dtypes": dtypes}


_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([a-z][a-z\-]*)\((.*)$")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
_TO_APPLY = re.compile(r"to_apply=%?([\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_PLUMBING = {"parameter", "tuple", "get-tuple-element", "bitcast"}


def _size(shape: str) -> int:
    """Bytes of the arrays in an HLO shape string (one array or a tuple)."""
    total = 0
    for dt, dims in _ARRAY.findall(shape):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * (_BYTES[dt] if dt in _BYTES else int(dt[1:]) // 8 or 1)
    return total


def hlo_ops(hlo_text: str) -> dict:
    """What an optimized HLO runs outside fusion bodies: {"fusions",
    "concatenate": [count, bytes], "slice": [count, bytes], "copy": [count,
    bytes], "custom_calls": {target: count}, "names": the first 12
    concatenates' and slices'}. A fusion counts as a concatenate, slice or
    copy when its body holds nothing else (XLA's ``wrapped_concatenate``,
    slice fusions: the copies a DotMerger or a layout change adds); bytes
    are its result's."""
    bodies, comps, name = {}, {}, None
    for line in hlo_text.splitlines():
        m = _COMPUTATION.match(line)
        if m and "=" not in line.split("(")[0]:
            name = m.group(2)
            comps[name] = []
            continue
        m = _INSTRUCTION.match(line)
        if m and name is not None:
            comps[name].append((m.group(1), m.group(2), m.group(3), m.group(4)))
    for ops in comps.values():  # fusion bodies and reducers (a call's computation runs)
        for _, _, op, rest in ops:
            m = _CALLS.search(rest) if op == "fusion" else (
                _TO_APPLY.search(rest) if op != "call" else None)
            if m:
                bodies[m.group(1)] = None
    out = {"fusions": 0, "concatenate": [0, 0], "slice": [0, 0], "copy": [0, 0],
           "custom_calls": {}, "names": []}
    for comp, ops in comps.items():
        if comp in bodies:
            continue
        for inst, shape, op, rest in ops:
            kind = op if op in ("concatenate", "slice", "copy") else None
            if op == "fusion":
                out["fusions"] += 1
                body = comps.get(_CALLS.search(rest).group(1) if _CALLS.search(rest) else "", [])
                inner = {o for _, _, o, _ in body} - _PLUMBING
                kind = next((k for k in ("concatenate", "slice", "copy") if inner == {k}), None)
            elif op == "custom-call" and _TARGET.search(rest):
                t = _TARGET.search(rest).group(1)
                out["custom_calls"][t] = out["custom_calls"].get(t, 0) + 1
            if kind:
                out[kind][0] += 1
                out[kind][1] += _size(shape)
                if kind != "copy" and len(out["names"]) < 12:
                    out["names"].append(inst)
    return out


def _cells(loop, m) -> str:
    return ((f"{loop:.0f} | " if loop is not None else " | ")
            + f"{m['span_us']:.0f} | {m['busy_us']:.0f} ({m['busy_max_us']:.0f}) | "
            f"{m['idle_us']:.0f} | " + " | ".join(f"{m['groups_us'][g]:.0f}" for g in ORDER)
            + f" | {m['comm_exposed_us']:.0f} |")


def loss_vs_one(one: dict, many: dict, n: int, loop1=None, loopn=None) -> tuple:
    """(loop delta, summary delta): N GPUs' per-device µs minus 1/N of one
    GPU's, per column: where the N-GPU step loses against ideal scaling."""
    keys = ("span_us", "busy_us", "busy_max_us", "idle_us", "comm_exposed_us")
    d = {k: many[k] - one[k] / n for k in keys}
    d["groups_us"] = {g: many["groups_us"][g] - one["groups_us"][g] / n for g in ORDER}
    loop = loopn - loop1 / n if loop1 and loopn else None
    return loop, d


def markdown(entries) -> str:
    """entries: [{"impl", "gpus", "us_per_step", "breakdown"}] -> a table
    of µs per step per device (the devices' mean), with a row per N-GPU
    entry of what it costs beyond 1/N of the same impl's 1-GPU entry."""
    head = ("| step | GPUs | loop µs/step | traced span | GPU busy (max) | idle | "
            + " | ".join(ORDER) + " | collective exposed |")
    lines = [head, "|" + "---|" * (len(ORDER) + 7)]
    tops, ones = [], {r["impl"]: r for r in entries
                      if r["gpus"] == 1 and "mean" in (r.get("breakdown") or {})}
    for r in entries:
        b = r.get("breakdown") or {}
        if "mean" not in b:
            lines.append(f"| {r['impl']} | {r['gpus']} | | {b.get('error', 'no trace')} |"
                         + " |" * (len(ORDER) + 3))
            continue
        lines.append(f"| {r['impl']} | {r['gpus']} | " + _cells(r.get("us_per_step"), b["mean"]))
        # a variant of the same model (+overlap...) against its base's 1-GPU trace
        one = ones.get(r["impl"]) or ones.get(r["impl"].split("+")[0])
        if one and r["gpus"] > 1:
            loop, d = loss_vs_one(one["breakdown"]["mean"], b["mean"], r["gpus"],
                                  one.get("us_per_step"), r.get("us_per_step"))
            lines.append(f"| {r['impl']}: {r['gpus']} GPUs − ¼ of 1 GPU |  | ".replace(
                "¼", f"1/{r['gpus']}") + _cells(loop, d))
        tops.append(f"- {r['impl']}, {r['gpus']} GPU(s), first device's top kernels (µs/step): "
                    + "; ".join(f"`{t['name'][:70]}` {t['group']} {t['us']:.0f}"
                                for t in b.get("top", [])[:8]))
    return "\n".join(lines) + "\n\n" + "\n".join(tops) + "\n"
