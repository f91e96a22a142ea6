"""The page of bench/quack_mlp (``bench/results/quack_mlp.md``) from the JSON
``run.py`` writes (``python -m bench.quack_mlp.run --render quack_mlp.json``
rewrites it from a JSON that came back from the GPU machine)."""

from __future__ import annotations

TARGET = 0.98   # cutecall's forward+backward speed over QuACK's torch calls, at least


def _us(row, path, name, key="device_us"):
    v = row["paths"].get(path, {}).get(name, {}).get(key)
    return v["median"] if v else None


def _tflops(row, name, us):
    gemms = 2 if name == "fwd" else 6
    return gemms * 2 * row["tokens"] * row["d"] * row["hidden"] / us / 1e6


def speed(row, name, other):
    """How many times faster cutecall is than `other` (> 1: faster)."""
    ours, theirs = _us(row, "cutecall", name), _us(row, other, name)
    return theirs / ours if ours and theirs else None


def summary(row) -> str:
    shape = f"{row['tokens']}x{row['d']}x{row['hidden']}"
    parts = [f"{shape} {row['activation']}"]
    for name in ("fwd", "fwd_bwd"):
        q, x = speed(row, name, "quack"), speed(row, name, "xla")
        parts.append(f"{name}: cutecall {_fmt(_us(row, 'cutecall', name), '.0f')} us, "
                     f"{_fmt(q, '.3f')}x QuACK, {_fmt(x, '.3f')}x XLA")
    return "  ".join(parts)


def _fmt(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def render(data) -> str:
    rows, v = data["rows"], data["versions"]
    worst = min((speed(r, "fwd_bwd", "quack") or 0.0) for r in rows)
    bitwise = all(r.get(f"{n}_bitwise_equal_to_quack") for r in rows for n in ("fwd", "fwd_bwd"))
    lines = [
        "# bench/quack_mlp: a fused MLP from JAX on QuACK's GEMMs", "",
        "`bench/quack_mlp/run.py`: `cutecall.quack.mlp.mlp` "
        "(`act(x @ w1.T) @ w2.T`, QuACK's activation-epilogue GEMM forward, its dact "
        "GEMM and plain GEMMs backward, each autotuned by `cutecall.autotune` over "
        "QuACK's sm90 tiles) against the same QuACK calls from torch, pinned to the "
        "tiles cutecall's tuner chose, and against XLA's dot + activation.", "",
        f"## Latest run: {data['date'][:10]}", "",
        f"- Device: {data['device']}" + (f" (`nvidia-smi`: {data['nvidia_smi']})"
                                         if data.get("nvidia_smi") else "") + ".",
        "- Software: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".",
        f"- Date: {data['date']}.",
        f"- Command: `{data['command']}` (on the GPU machine: "
        "`bash tools/gpu/gpu bench quack_mlp`; the page again from the JSON: "
        "`python -m bench.quack_mlp.run --render bench/results/quack_mlp.json`).",
        "- Raw data: `quack_mlp.json`.",
        f"- Data: bf16; x ~ N(0, 1), w ~ N(0, 1/fan_in), a given cotangent; "
        f"activation `{rows[0]['activation']}`; w1 (hidden, d), w2 (d, hidden).",
        f"- Timing: JAX device time from a profiler trace of {data['args']['calls']} "
        "chained calls in one `jit` (first kernel start to last kernel end; busy = "
        f"kernel time summed); torch: CUDA events around {data['args']['calls']} "
        f"back-to-back passes; median of {data['args']['trials']} interleaved trials. "
        "Forward+backward is a VJP with a given cotangent (out, dx, dw1, dw2: 6 GEMMs); "
        "forward is the no-grad pass (2 GEMMs, fc1 storing no preact).", "",
        "## Findings", "",
        f"- Forward+backward, cutecall vs the same QuACK calls from torch: at least "
        f"**{worst:.3f}×** as fast (target ≥ {TARGET}×: "
        f"{'met' if worst >= TARGET else 'NOT met'}).",
        "- Outputs bit for bit equal to QuACK's: "
        + ("yes, every shape and pass." if bitwise else "NO (see the JSON)."),
        "",
        "| tokens×d×hidden | pass | cutecall µs (busy) | QuACK torch µs | XLA µs | "
        "cutecall vs QuACK | cutecall vs XLA | cutecall TFLOP/s |",
        "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for name in ("fwd", "fwd_bwd"):
            us = _us(r, "cutecall", name)
            lines.append(
                f"| {r['tokens']}×{r['d']}×{r['hidden']} | {name} | {_fmt(us)} "
                f"({_fmt(_us(r, 'cutecall', name, 'busy_us'))}) | "
                f"{_fmt(_us(r, 'quack', name))} | {_fmt(_us(r, 'xla', name))} | "
                f"{_fmt(speed(r, name, 'quack'), '.3f')}× | "
                f"{_fmt(speed(r, name, 'xla'), '.3f')}× | "
                f"{_fmt(us and _tflops(r, name, us), '.0f')} |")
    lines += ["", "\"vs\" columns: the other path's time over cutecall's (> 1: cutecall "
              "faster).", "", "## Tiles and tuning", "",
              "| tokens×d×hidden | " + " | ".join(
                  ("fc1", "fc1 (no grad)", "fc2", "dact", "dw2", "dx", "dw1"))
              + " | tuning s | compiled in process |", "|---" * 10 + "|"]
    for r in rows:
        t = r["tuning"]
        tiles = [t["tiles"].get(s, "—") for s in
                 ("fc1", "fc1_infer", "fc2", "dact", "dw2", "dx", "dw1")]
        warm = (f" (+ {t['warmup_s']:.0f} s compiling in workers)" if "warmup_s" in t else "")
        lines.append(f"| {r['tokens']}×{r['d']}×{r['hidden']} | " + " | ".join(tiles)
                     + f" | {t['tune_s']:.0f}{warm} | {t['compiles_in_process']} |")
    lines += ["", f"Tuned over the first {rows[0]['candidates']} of QuACK's 22 sm90 tiles "
              "(`_get_sm90_configs()` without swap_ab); every GEMM runs the static "
              "persistent scheduler on both sides. A tuning time near zero means the "
              "winners came from the artifact store of an earlier run.", ""]
    lines += ["---", "", "History: `git log -p -- bench/results/quack_mlp.md` (and "
              "`quack_mlp.json`).", ""]
    return "\n".join(lines)

