"""One child process of bench/scaling/suite.py: the configurations of one
step on 1, 2 and 4 of the visible GPUs, in priority order, each timed as a
loop of donated steps (bench/scaling/chains.loop_us) with its XLA options
set per compile, some traced (bench/scaling/breakdown.py). Each row is
appended to the rows file (JSON lines) the moment it is measured, so a child
cut off by the budget keeps what it finished; a configuration that would
start past the deadline is recorded as skipped.

  python bench/scaling/suite_child.py SPEC.json     (suite.py writes the spec)
  python bench/scaling/suite_child.py --warm-quack '{"tokens": 32768}'

``--warm-quack`` compiles the QuACK MLP step's GEMMs at their pinned tiles
into the artifact store in parallel worker processes (no GPU client:
``cutecall.quack.mlp.warmup``), so the MLP child loads them; suite.py runs it
in the background, niced, while the attention children run.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

CUTECALL_IMPLS = ("fa4_cutecall", "mlp_quack")


def emit(path: str, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    short = {k: v for k, v in row.items() if k not in ("breakdown", "trials_us")}
    print("ROW " + json.dumps(short)[:600], flush=True)


def _alive(pid) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        return bool(pid) and open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def traced(run, steps: int, folder: str, stub: bool) -> dict:
    """breakdown.summarize_trace of `steps` more steps of `run`, traced."""
    import jax
    import breakdown
    run(2)
    jax.profiler.start_trace(folder)
    try:
        run(steps)
    finally:
        jax.profiler.stop_trace()
    # the CPU has no GPU planes: its host plane exercises the same code
    prefixes = dict(plane_prefix="/host:CPU", line_prefix="") if stub else {}
    return breakdown.summarize_trace(folder, steps, **prefixes)


def measure(spec: dict, cfg: dict, devices, cases: dict) -> dict:
    import breakdown
    import chains
    import variants
    impl, model = spec["impl"], cfg["model"]
    key = (impl, model)
    if key not in cases:
        cases[key] = variants.case(impl, model, stub=spec["stub"],
                                   sizes=spec["sizes"].get(impl.split("_")[0]))
    step, args = variants.on_devices(cases[key], devices, cfg["grads"])
    t0 = time.perf_counter()
    run, out = compile_loop(step, args, variants.XLA[cfg["xla"]])
    out["compile_s"] = round(time.perf_counter() - t0, 1)
    hlo = run.compiled.as_text()
    for field, parse in (("collectives", breakdown.collectives), ("hlo_ops", breakdown.hlo_ops)):
        try:
            out[field] = parse(hlo)
        except Exception as e:  # noqa: BLE001
            out[field] = {"error": f"{type(e).__name__}: {e}"[:300]}
    tag = spec.get("tag", "") if spec.get("env") else ""  # the row's own name, tagged
    if cfg.get("dump_hlo"):
        name = f"hlo-{variants.name(impl, model, cfg['grads'], cfg['xla'])}{tag}-{len(devices)}.txt"
        with open(os.path.join(os.path.dirname(spec["rows"]), name), "w") as f:
            f.write(hlo)
    executes = (chains.cutecall_executes if impl in CUTECALL_IMPLS and not spec["stub"]
                else None)
    warm = _alive(spec.get("warm_pid"))
    # --equal-work: as many steps per trial as GPUs times --steps, so every
    # GPU count runs its trials for the same time under the same power cap
    n = spec["steps"] * (len(devices) if spec.get("equal_work") else 1)
    m = chains.loop_us(step, args, steps=n, trials=spec["trials"], executes=executes, run=run)
    out.update(us_per_step=m["loop_us"], trials_us=m["loop_all"], steps_per_trial=n,
               us_per_step_median=m["loop_median_us"])
    if warm or _alive(spec.get("warm_pid")):
        out["warm_running"] = True  # the QuACK compile ran beside the timing (niced)
    if "executes_per_step_loop" in m:
        out["executes_per_step_loop"] = m["executes_per_step_loop"]
    if cfg.get("trace"):
        folder = os.path.join(spec["traces"], f"{impl}-{model}-{cfg['grads']}-{cfg['xla']}"
                              f"{tag}-{len(devices)}")
        shutil.rmtree(folder, ignore_errors=True)  # a kept trace is never read as this one's
        try:
            out["breakdown"] = traced(run, spec["trace_steps"], folder, spec["stub"])
        except Exception as e:  # noqa: BLE001  the timing stands without its trace
            out["breakdown"] = {"error": f"{type(e).__name__}: {e}"[:1000]}
        if not cfg.get("keep_trace"):
            shutil.rmtree(folder, ignore_errors=True)
    return out


def compile_loop(step, args, options: dict):
    """(chains.donated_loop, {}) compiled with `options`; where that fails
    and `options` hold variants.OPTIONAL ones (a jaxlib without them), the
    loop compiled without those, and {"options_dropped", "options_error"}."""
    import chains
    import variants
    try:
        return chains.donated_loop(step, args, options), {}
    except Exception as e:  # noqa: BLE001
        dropped = [k for k in options if k in variants.OPTIONAL]
        if not dropped:
            raise
        dropped = [k for k in dropped if k in str(e)] or dropped  # the one named, or all
        print(f"compile failed with {dropped}: {type(e).__name__}: {e}"[:1000], flush=True)
        kept = {k: v for k, v in options.items() if k not in dropped}
        return chains.donated_loop(step, args, kept), {
            "options_dropped": dropped, "options_error": f"{type(e).__name__}: {e}"[:300]}


def warm_quack(sizes: dict) -> int:
    import jax
    import jax.numpy as jnp
    import steps
    from cutecall.quack import mlp as qm
    s = dict(steps.MLP, **sizes)
    t, d, h = s["tokens"], s["d"], s["hidden"]
    spec = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.bfloat16)  # noqa: E731
    tiles = tuple(dict.fromkeys(steps.pinned_tiles().values()))
    t0 = time.perf_counter()
    report = qm.warmup(spec(t, d), spec(h, d), spec(d, h), steps.ACTIVATION,
                       candidates=tiles, workers=min(6 * len(tiles),
                                                     max(1, (os.cpu_count() or 2) // 4)))
    print(f"warm-quack: {time.perf_counter() - t0:.1f} s\n{report}", flush=True)
    return 0


def main(spec_path: str) -> int:
    spec = json.load(open(spec_path))
    if spec.get("xla_flags"):  # read once, when jax's backend starts: before the import
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {spec['xla_flags']}".strip()
    os.environ.update(spec.get("env", {}))  # e.g. NCCL's, read when NCCL starts
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}", flush=True)
    import jax
    import variants
    rows = spec["rows"]
    devices = jax.devices()
    emit(rows, {"meta": {"device": f"{len(devices)} x {devices[0].device_kind}",
                         "platform": devices[0].platform, "jax": jax.__version__,
                         "child": spec["name"]}})
    cases: dict = {}
    for cfg in spec["configs"]:
        n = cfg["gpus"]
        row = {"impl": variants.name(spec["impl"], cfg["model"], cfg["grads"], cfg["xla"]),
               "base": spec["impl"], "model": cfg["model"], "grads": cfg["grads"],
               "xla": cfg["xla"], "gpus": n, "processes": 1, "command_buffers": "on",
               "xla_options": variants.XLA[cfg["xla"]]}
        if spec.get("xla_flags"):
            row["xla_flags"] = spec["xla_flags"]
        if spec.get("env"):
            row["impl"] += spec.get("tag", "")
            row["env"] = spec["env"]
        left = spec["deadline"] - time.time()
        if n > len(devices):
            row["skipped"] = f"{len(devices)} devices visible"
        elif left < cfg.get("est_s", 0):
            row["skipped"] = f"budget: {left:.0f} s left, ~{cfg.get('est_s')} s needed"
        if "skipped" in row:
            emit(rows, row)
            continue
        t0 = time.perf_counter()
        try:
            row.update(measure(spec, cfg, devices[:n], cases))
        except Exception as e:  # noqa: BLE001  one failing row must not lose the others
            row["error"] = f"{type(e).__name__}: {e}"[:2000]
            traceback.print_exc()
        row["seconds"] = round(time.perf_counter() - t0, 1)
        emit(rows, row)
        gc.collect()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--warm-quack":
        sys.exit(warm_quack(json.loads(sys.argv[2])))
    sys.exit(main(sys.argv[1]))
