#!/usr/bin/env bash
# bench/cpp_bundle on the GPU machine in one device call, under a hard cap:
# exports the 10-kernel bundle, builds bench.cc against the installed C++
# package (`cutecall --cmakedir` of the site `gpu setup` made), runs lazy
# and eager processes alternately (run.py), and writes
#   $OUT/cpp_bundle/cpp_bundle.json   (rewritten after each process)
#   $OUT/cpp_bundle/cpp_bundle.log    (the summary run.py prints)
#
#   bash tools/gpu/gpu setup                 # once per machine, before
#   bash bench/cpp_bundle/device_run.sh      # CPP_BUNDLE_CAP=90 s, GPU 0
#   DRY_RUN=1 bash bench/cpp_bundle/device_run.sh   # CPU: export, build, open
#
# Environment: CPP_BUNDLE_CAP (seconds, 90: the whole script), OUT
# (/tmp/cutecall_out), CUDA_VISIBLE_DEVICES (0 unless set), PYTHON (for
# DRY_RUN; python3).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-/tmp/cutecall_out}"
dir="$OUT/cpp_bundle"
cap="${CPP_BUNDLE_CAP:-90}"
mkdir -p "$dir"
cd "$REPO" || exit 1
if [ "${DRY_RUN:-0}" = 1 ]; then
  timeout -k 5 "$cap" "${PYTHON:-python3}" "$HERE/run.py" --dry-run \
    --work /tmp/cutecall_cpp_bundle_dry 2>&1 | tee "$dir/dry_run.log"
  exit "${PIPESTATUS[0]}"
fi
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
# No process starts after cap - 15 s (one lazy process takes ~4 s); the
# JSON holds every process finished before the cap.
OUT="$dir" BENCH_TIMEOUT="$((cap - 2))" timeout -k 5 "$cap" \
  bash tools/gpu/gpu bench cpp_bundle --out "$dir/cpp_bundle.json" \
  --work /tmp/cutecall_cpp_bundle --processes 5 --budget "$((cap - 15))"
rc=$?
[ -f "$dir/cpp_bundle.json" ] || { echo "cpp_bundle: no results (rc $rc)"; exit 1; }
echo "cpp_bundle: rc $rc; results in $dir/cpp_bundle.json"
exit "$rc"
