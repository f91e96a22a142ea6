#!/usr/bin/env bash
# Issue 35 on a 4-GPU machine, after `bash tools/gpu/gpu setup`, in one
# device call: the scaling table (bench/scaling/run.py, command buffers on),
# the multi-process GPU tests (tests/distributed: jax.distributed 2 and 4
# processes, torchrun 2 and 4 ranks with and without CUDA graphs, a launch
# on a non-current device), the FA4 steps with one process per GPU
# (bench/scaling/multiproc.py, rows added to the table), and the
# command-buffer profile (bench/scaling/cb_profile.py), in that order, within BUDGET seconds
# (default 500): a phase that would start with under 40 s left is skipped.
#
#   bash bench/scaling/device_run.sh [table] [procs] [tests] [profile] [overhead]
#
# No phase named: table tests procs profile. `overhead` (bench/overhead, in-jit and
# donated; for a change to the FFI handler) is never run by default.
# $OUT gets at most 8 files: scaling.json, scaling.md, pytest.log, profile.json,
# profile.md, profile-raw.tar.gz, device_run.log (and overhead.json).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT="${OUT:-/tmp/cutecall_out}"
mkdir -p "$OUT"
BUDGET="${BUDGET:-500}"
T0=$SECONDS
LOG="$OUT/device_run.log"
left() { echo $((BUDGET - (SECONDS - T0))); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
say() { printf '== [%3ds] %s\n' "$((SECONDS - T0))" "$*" | tee -a "$LOG"; }

SITE="${CUTECALL_SITE:-/tmp/site}"
[ -f "$SITE/env.sh" ] || { echo "no $SITE/env.sh: run 'bash tools/gpu/gpu setup' first"; exit 1; }
# shellcheck disable=SC1091
. "$SITE/env.sh"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(table tests procs profile)
{ nvidia-smi -L; nvidia-smi topo -m; } >>"$LOG" 2>&1
for phase in "${phases[@]}"; do
  if [ "$(left)" -lt 40 ]; then say "skip $phase: budget spent"; continue; fi
  say "$phase ($(left) s left)"
  case "$phase" in
    table)
      timeout "$(cap 300)" "$PY" bench/scaling/run.py --out "$OUT/scaling.json" \
        --page "$OUT/scaling.md" >>"$LOG" 2>&1 ;;
    procs)
      timeout "$(cap 200)" "$PY" bench/scaling/multiproc.py --json "$OUT/scaling.json" \
        --procs 4 >>"$LOG" 2>&1 ;;
    tests)
      timeout "$(cap 300)" "$PY" -m pytest -q -rfs -m gpu -p no:cacheprovider \
        tests/distributed >"$OUT/pytest.log" 2>&1 ;;
    profile)
      timeout "$(cap 300)" "$PY" bench/scaling/cb_profile.py --out "$OUT" \
        --budget "$(( $(cap 300) - 15 ))" >>"$LOG" 2>&1 ;;
    overhead)
      timeout "$(cap 240)" "$PY" bench/overhead/run.py --out "$OUT/overhead.json" \
        >>"$LOG" 2>&1 ;;
    *) say "unknown phase $phase (table procs tests profile overhead)" ;;
  esac
  say "$phase: exit $?"
done
tail -n 40 "$OUT/scaling.md" 2>/dev/null
grep -E "passed|failed|error" "$OUT"/pytest*.log 2>/dev/null | tail -n 5
grep -A 30 "^| impl" "$OUT/profile.md" 2>/dev/null
say "done"
