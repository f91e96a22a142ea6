"""``--lower-only``: no GPU needed. Lowers every (target, scenario) for CUDA
and reports the custom-call targets in the StableHLO, which checks that each
path builds (DSL compiles included: set ``CUTE_DSL_ARCH=sm_90a``) and that
the chains lower as intended (the donated chain: input aliased to the
output)."""

from __future__ import annotations

import re
from typing import Any

from bench.overhead.config import Config
from bench.harness import short_error
from bench.overhead.paths import Paths
from bench.overhead.scenarios import SCENARIO_SPECS, has_column


def lower_only(cfg: Config, paths: Paths) -> dict[str, Any]:
    """``{target: {"path", "graph", scenario: {custom_calls, targets,
    func_calls[, input_aliased]} or {"error"}}}`` (``"error"`` at the target
    when it did not build)."""
    import jax
    import jax.numpy as jnp

    x = jax.ShapeDtypeStruct((cfg.n,), jnp.float32)
    out: dict[str, Any] = {}
    for target in paths.targets():
        row: dict[str, Any] = {"path": target.path, "graph": target.graph}
        out[target.key] = row
        try:
            call = target.build()
        except Exception as exc:  # noqa: BLE001
            row["error"] = "build: " + short_error(exc)
            continue
        for name, spec in SCENARIO_SPECS.items():
            if not has_column(name, target.graph):
                continue
            try:
                fn, _ = spec.build(call, cfg)
                text = fn.trace(x).lower(lowering_platforms=("cuda",)).as_text()
                names = re.findall(r"custom_call @([\w.]+)\(", text)
                names += re.findall(r'call_target_name = "([^"]+)"', text)
                row[name] = {"custom_calls": len(names), "targets": sorted(set(names)),
                             "func_calls": len(re.findall(r"\bcall @", text))}
                if spec.feedback:
                    row[name]["input_aliased"] = "tf.aliasing_output" in text
            except Exception as exc:  # noqa: BLE001
                row[name] = {"error": short_error(exc)}
    return out


def lowering_failed(low: dict[str, Any]) -> bool:
    return any("error" in r or any("error" in v for v in r.values() if isinstance(v, dict))
               for r in low.values())


def format_lowering_table(low: dict[str, Any]) -> str:
    lines = ["Lowered for CUDA (no GPU used): custom-call targets per target and scenario"]
    for key, row in low.items():
        if "error" in row:
            lines.append(f"  {key:22s} ERROR {row['error']}")
            continue
        for name in SCENARIO_SPECS:
            r = row.get(name)
            if r is None:
                continue
            if "error" in r:
                lines.append(f"  {key:22s} {name:15s} ERROR {r['error']}")
                continue
            line = (f"  {key:22s} {name:15s} {r['custom_calls']} custom_call op(s), "
                    f"{r['func_calls']} func call(s): {', '.join(r['targets'])}")
            if "input_aliased" in r:
                line += "; input aliased to output" if r["input_aliased"] else "; input NOT aliased"
            lines.append(line)
    return "\n".join(lines)
