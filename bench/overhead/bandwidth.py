"""Copy bandwidth: a ``--bw-gib`` (1 GiB) f32 copy, input -> new output,
through cutecall (``cutecall.examples.kernels.copy``), cutlass.jax (same
launcher) and XLA's own elementwise kernel (``x + s`` with ``s`` a runtime
f32 zero, which XLA cannot fold away), each jitted and dispatched back to
back. GB/s counts bytes read + written (2 x size) per call, median over
``--bw-trials`` trials; each path's output is checked against its input
once."""

from __future__ import annotations

from typing import Any, Callable

from bench.overhead.config import Config
from bench.harness import SKIPPED, Deadline, log, measure, short_error
from bench.overhead.paths import Paths


def bandwidth_paths(paths: Paths, n: int) -> dict[str, Callable[[], Callable]]:
    def xla():
        import jax
        import jax.numpy as jnp

        add = jax.jit(lambda x, s: x + s)
        zero = jnp.zeros((), jnp.float32)
        return lambda x: add(x, zero)

    return {
        "cutecall": lambda: paths.cutecall(True, launcher="copy", n=n),
        "cutlass_jax": lambda: paths.cutlass_jax(True, launcher="copy", n=n),
        "xla": xla,
    }


def run_bandwidth(cfg: Config, paths: Paths, deadline: Deadline) -> dict[str, Any]:
    """``{"elements", "bytes", "bytes_moved_per_call", path: {"gbps",
    "ms_per_call", "output_matches_input", "trials_gbps", "reps",
    "compile_s"} or {"error"}}``."""
    import jax
    import jax.numpy as jnp

    n = int(cfg.bw_gib * (1 << 30)) // 4
    nbytes = n * 4
    out: dict[str, Any] = {"elements": n, "bytes": nbytes, "bytes_moved_per_call": 2 * nbytes}
    try:
        x = jax.block_until_ready(jnp.arange(n, dtype=jnp.float32))
    except Exception as exc:  # noqa: BLE001
        out["error"] = short_error(exc)
        return out
    for name, build in bandwidth_paths(paths, n).items():
        if name not in ("xla",) and name not in cfg.paths:
            continue
        if deadline.expired():
            out[name] = {"error": SKIPPED}
            continue
        try:
            call = build()
            fn = jax.jit(lambda v, c=call: c(v)) if name != "xla" else call
            y = jax.block_until_ready(fn(x))
            ok = bool(jnp.array_equal(y, x))
            del y
            m = measure(fn, x, 1, cfg, trials=cfg.bw_trials, reps=cfg.bw_reps)
            gbps = 2 * nbytes / (m.us_per_call * 1e-6) / 1e9
            out[name] = {"gbps": round(gbps, 1), "ms_per_call": round(m.us_per_call / 1e3, 4),
                         "output_matches_input": ok,
                         "trials_gbps": [round(2 * nbytes / (t * 1e-6) / 1e9, 1) for t in m.trials_us],
                         "reps": m.reps, "compile_s": m.compile_s}
        except Exception as exc:  # noqa: BLE001
            out[name] = {"error": short_error(exc)}
        shown = f"{out[name]['gbps']} GB/s" if "gbps" in out[name] else out[name]["error"]
        log(f"[bench] bandwidth {name:12s} {shown}")
    return out
