"""What a benchmark records and prints, shared by the benchmarks
(``bench.report``): the versions of installed distributions,
the GPU as ``nvidia-smi`` names it, the JSON file, and text tables of
measured cells (``harness.Measurement`` records, as dicts)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from bench.harness import log


def dist_version(name: str) -> str | None:
    """The installed version of distribution ``name``, None if absent."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions(names: tuple[str, ...] | list[str]) -> dict[str, str | None]:
    return {name: dist_version(name) for name in names}


def nvidia_smi(query: str = "name,driver_version,memory.total,clocks.max.sm") -> str | None:
    """``nvidia-smi --query-gpu=QUERY`` (CSV, no header), None without it."""
    try:
        res = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20)
        return res.stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def write_json(path: str, data: dict[str, Any]) -> None:
    """``data`` as indented JSON to ``path`` (``-``: stdout), folders made."""
    if path == "-":
        print(json.dumps(data, indent=1))
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=1) + "\n")
    log(f"[bench] wrote {p}")


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: the result column it reads, its two header lines, and
    how it shows a measurement that has a value."""

    key: str
    head: tuple[str, str]
    show: Callable[[dict[str, Any]], str]


def _cell(m: dict[str, Any] | None, show: Callable[[dict[str, Any]], str], notes: list[str]) -> str:
    """A measured cell as text: its value, "-" (not measured), "skip" (time
    budget spent) or ERRn, n numbering the distinct errors in ``notes``."""
    if not m:
        return "-"
    if m.get("us_per_call") is not None:
        return show(m)
    err = m.get("error") or "failed"
    if err.startswith("skipped"):
        return "skip"
    if err not in notes:
        notes.append(err)
    return f"ERR{notes.index(err) + 1}"


def format_grid(title: str, rows: list[dict[str, Any]], columns: list[Column],
                footer: list[str], label: Callable[[dict[str, Any]], str]) -> str:
    """A table: a line per row (``label(row)`` first, then one cell per
    column, read from ``row[column.key]``), the errors numbered below it,
    then ``footer``."""
    notes: list[str] = []
    body = [[label(r)] + [_cell(r.get(c.key), c.show, notes) for c in columns] for r in rows]
    width0 = max([len("target")] + [len(b[0]) for b in body])
    widths = [max([9, *map(len, c.head)] + [len(b[i + 1]) for b in body])
              for i, c in enumerate(columns)]
    lines = [title] + [
        "  ".join([first.ljust(width0)] + [c.head[k].rjust(w) for c, w in zip(columns, widths)])
        for k, first in enumerate(("target", ""))]
    lines.append("-" * len(lines[-1]))
    lines += ["  ".join([b[0].ljust(width0)] + [v.rjust(w) for v, w in zip(b[1:], widths)])
              for b in body]
    lines += [f"  ERR{i + 1}: {e}" for i, e in enumerate(notes)]
    return "\n".join(lines + footer)
