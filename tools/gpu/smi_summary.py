#!/usr/bin/env python3
"""What the GPUs' clocks and power did during a benchmark: a summary of the
CSV that ``SMI=1 bash tools/gpu/gpu bench NAME`` records with nvidia-smi
every 50 ms while it runs (clock, power, temperature, clock-event reasons).

  python3 tools/gpu/smi_summary.py LABEL.smi.csv [--json out.json]

Per GPU, over the samples it was busy (power above --busy-w): the count, the
SM clock's min / median / max, power median / max, the hottest temperature,
and the share of samples the software power cap (reason bit 0x4) held the
clock: under the cap the first trials of a timed row run faster than the
later ones, and rows move between runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys

SW_POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap


def _num(text: str) -> float:
    return float(text.strip().split()[0])


def summarize(path: str, busy_w: float = 250.0) -> dict:
    """{gpu index: {samples, clock_mhz: [min, median, max], power_w:
    [median, max], temp_max_c, power_capped}} of the busy samples."""
    per_gpu: dict[int, list] = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            try:
                gpu, clock, power, temp = int(row[1]), _num(row[2]), _num(row[3]), int(row[4])
                reasons = int(row[5].strip(), 16)
            except (IndexError, ValueError):
                continue  # the header, or a line cut when the logger stopped
            if power > busy_w:
                per_gpu.setdefault(gpu, []).append((clock, power, temp, reasons))
    out = {}
    for gpu, rows in sorted(per_gpu.items()):
        clocks = [r[0] for r in rows]
        powers = [r[1] for r in rows]
        out[gpu] = dict(samples=len(rows),
                        clock_mhz=[min(clocks), statistics.median(clocks), max(clocks)],
                        power_w=[statistics.median(powers), max(powers)],
                        temp_max_c=max(r[2] for r in rows),
                        power_capped=sum(bool(r[3] & SW_POWER_CAP) for r in rows) / len(rows))
    return out


def lines(summary: dict) -> list[str]:
    return [f"GPU {g}: {s['samples']} busy samples, SM clock {s['clock_mhz'][0]:.0f} / "
            f"{s['clock_mhz'][1]:.0f} / {s['clock_mhz'][2]:.0f} MHz (min / median / max), "
            f"power {s['power_w'][0]:.0f} / {s['power_w'][1]:.0f} W (median / max), "
            f"{s['temp_max_c']} C max, software power cap in {100 * s['power_capped']:.0f}%"
            for g, s in summary.items()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--json", help="write the summary here too")
    ap.add_argument("--busy-w", type=float, default=250.0, help="busy above this power (W)")
    args = ap.parse_args()
    summary = summarize(args.csv, args.busy_w)
    print("\n".join(lines(summary)) or "no busy samples")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(k): v for k, v in summary.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
