#!/usr/bin/env bash
# Issue 35's scaling run on a 4-GPU machine, after `bash tools/gpu/gpu setup`,
# in one device call with a hard wall-time cap (CAP, default 420 s: the whole
# script runs under `timeout`):
#
#   bash bench/scaling/device_run.sh                 # the suite only (default)
#   bash bench/scaling/device_run.sh suite tests     # and more phases, same cap
#   bash bench/scaling/device_run.sh --cpu-smoke     # here, no GPU: 4 CPU devices, tiny shapes
#   CAP=330 SUITE_PLAN=flags bash bench/scaling/device_run.sh   # the follow-up plan
#
# SUITE_PLAN (table, flags) and SUITE_ONLY (comma-separated child names) pass
# to suite.py's --plan and --only (bench/scaling/plans.py; `python3
# bench/scaling/suite.py --plan flags --dry-run` lists them); SUITE_ARGS adds
# more of suite.py's options (e.g. "--equal-work --trials 5").
#
# Phases, in the order named:
#   suite     bench/scaling/suite.py: the table (FA4 through cutecall, the same
#             step on cuDNN, QuACK's MLP, the MLP on XLA's dot at 1/2/4 GPUs,
#             command buffers on, loop of donated steps), the traced per-kernel
#             breakdown of each step at 1 and 4 GPUs, then the variants
#             (+overlap, _L4, +f32grad), cutecall first (SUITE_PLAN=flags: the
#             MLP steps, then +nomerge/+tuned/+nocollcb), until the budget:
#             CAP - 30 s, or SUITE_BUDGET
#   tests     pytest -m gpu tests/distributed (jax.distributed, torchrun)
#   procs     bench/scaling/multiproc.py: FA4 steps, one process per GPU (rows added)
#   profile   bench/scaling/cb_profile.py: command-buffer variants, VLOG, HLO
#   overhead  bench/overhead (in-jit and donated)
# A phase that would start with under 40 s left is skipped.
#
# Writes $OUT/scaling/: scaling.json, scaling.md, logs.tar.gz (the children's
# logs, the 4-GPU traces and optimized HLO texts), device_run.log (+ pytest.log, profile.*,
# overhead.json for those phases), smi.csv and smi.json (clocks, power and the
# power cap every 50 ms: bench/scaling/smi_summary.py). CUDA_VISIBLE_DEVICES
# defaults to 0,1,2,3.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
CAP="${CAP:-420}"
if [ -z "${SCALING_CAPPED:-}" ]; then  # the hard cap: everything below, children included
  SCALING_CAPPED=1 exec timeout -k 5 "$CAP" bash "${BASH_SOURCE[0]}" "$@"
fi
T0=$SECONDS
SMOKE=()
phases=()
for a in "$@"; do
  if [ "$a" = --cpu-smoke ]; then SMOKE=(--cpu-smoke); else phases+=("$a"); fi
done
[ ${#phases[@]} -gt 0 ] || phases=(suite)
DIR="${OUT:-/tmp/cutecall_out}/scaling"
mkdir -p "$DIR"
LOG="$DIR/device_run.log"
BUDGET=$((CAP - 10))
left() { echo $((BUDGET - (SECONDS - T0))); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
say() { printf '== [%3ds] %s\n' "$((SECONDS - T0))" "$*" | tee -a "$LOG"; }

if [ ${#SMOKE[@]} -eq 0 ]; then
  SITE="${CUTECALL_SITE:-/tmp/site}"
  [ -f "$SITE/env.sh" ] || { echo "no $SITE/env.sh: run 'bash tools/gpu/gpu setup' first"; exit 1; }
  # shellcheck disable=SC1091
  . "$SITE/env.sh"
  export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0,1,2,3}"
  { nvidia-smi -L; nvidia-smi topo -m; } >>"$LOG" 2>&1
  # Clocks, power and the power cap every 50 ms while the phases run
  # (bench/scaling/smi_summary.py reads them at the end).
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 50 >"$DIR/smi.csv" 2>/dev/null &
  SMI_PID=$!
  trap 'kill "$SMI_PID" 2>/dev/null' EXIT TERM INT  # the cap's timeout included
fi
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
say "phases: ${phases[*]} (cap ${CAP} s; CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-})"

for phase in "${phases[@]}"; do
  if [ "$(left)" -lt 40 ]; then say "skip $phase: budget spent"; continue; fi
  say "$phase ($(left) s left)"
  case "$phase" in
    suite)
      budget="${SUITE_BUDGET:-$(( $(left) - 20 ))}"
      sel=(--plan "${SUITE_PLAN:-table}")
      [ -z "${SUITE_ONLY:-}" ] || sel+=(--only "$SUITE_ONLY")
      # shellcheck disable=SC2206
      [ -z "${SUITE_ARGS:-}" ] || sel+=($SUITE_ARGS)  # e.g. "--equal-work --trials 5"
      "$PY" bench/scaling/suite.py --out "$DIR" --budget "$budget" --max-gpus "${SUITE_MAX_GPUS:-4}" "${sel[@]}" "${SMOKE[@]}" \
        2>&1 | tee -a "$LOG" | grep -E '^(==|   |plan)'
      rc=${PIPESTATUS[0]} ;;
    tests)
      timeout "$(cap 300)" "$PY" -m pytest -q -rfs -m gpu -p no:cacheprovider \
        tests/distributed >"$DIR/pytest.log" 2>&1
      rc=$?
      tail -n 5 "$DIR/pytest.log" ;;
    procs)
      timeout "$(cap 200)" "$PY" bench/scaling/multiproc.py --json "$DIR/scaling.json" \
        --procs 4 >>"$LOG" 2>&1
      rc=$? ;;
    profile)
      timeout "$(cap 300)" "$PY" bench/scaling/cb_profile.py --out "$DIR" \
        --budget "$(( $(cap 300) - 15 ))" >>"$LOG" 2>&1
      rc=$? ;;
    overhead)
      timeout "$(cap 240)" "$PY" bench/overhead/run.py --out "$DIR/overhead.json" \
        >>"$LOG" 2>&1
      rc=$? ;;
    *) rc="unknown phase (suite tests procs profile overhead)" ;;
  esac
  say "$phase: exit $rc"
done
if [ -n "${SMI_PID:-}" ]; then
  kill "$SMI_PID" 2>/dev/null
  say "clocks and power (busy samples, $DIR/smi.csv):"
  "$PY" bench/scaling/smi_summary.py "$DIR/smi.csv" --json "$DIR/smi.json" 2>&1 | tee -a "$LOG"
fi
[ -f "$DIR/scaling.md" ] && sed -n '/^## The table/,/^## What the profile/p' "$DIR/scaling.md"
say "done; files in $DIR: $(cd "$DIR" && echo *)"
