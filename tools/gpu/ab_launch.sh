#!/bin/bash
# The launch-cost A/B (`gpu ab-launch`): one device call that A/Bs an old
# build against this checkout on the launch costs, at once on three GPUs of
# one host, under one hard wall-time cap:
#
#   GPU A  torch_launch miss   first compile, the miss path (a new launch
#                              object, kernel cached), a new class, a hit
#   GPU B  overhead            in-jit us per call (cutecall vs hand-written)
#   GPU C  torch_launch        k() and the other host launch paths
#
# Each is `tools/gpu/gpu ab` (old, new, old, new...: fresh processes, the
# benchmark script from this checkout for both sites). Needs both sites:
#   bash tools/gpu/gpu setup                                   # new: /tmp/site
#   bash tools/gpu/gpu setup --tree .gpu/base.tar.gz --site /tmp/site_old
# (.gpu/base.tar.gz is `git archive <old commit> | gzip`; carry it). Without
# the old site and with AB_BUILD_OLD=1 the script builds it first (~1 min,
# inside the cap).
#
#   bash tools/gpu/gpu ab-launch            # the device call
#   bash tools/gpu/gpu ab-launch --dry-run  # print the commands
#
# Environment: AB_CAP (240 s, the whole script), AB_OLD_SITE
# (/tmp/site_old), AB_NEW_SITE (/tmp/site), AB_GPUS ("0 1 2": A, B, C),
# AB_MISS_ROUNDS (3), AB_OVERHEAD_ROUNDS (2), AB_LAUNCH_ROUNDS (2).
# Writes $OUT/launch_ab/ab/*.json|log (gpu ab's, one label per
# benchmark) and $OUT/launch_ab/{miss,overhead,launch}.txt; prints
# the three A/B tables.
set -u
CAP="${AB_CAP:-240}"
OLD="${AB_OLD_SITE:-/tmp/site_old}"
NEW="${AB_NEW_SITE:-/tmp/site}"
read -r GPU_A GPU_B GPU_C <<<"${AB_GPUS:-0 1 2}"
DRY=0
[ "${1:-}" = --dry-run ] && DRY=1
HERE="$(cd "$(dirname "$0")/../.." && pwd)"
GPU="bash $HERE/tools/gpu/gpu"
R="${OUT:-/tmp/cutecall_out}/launch_ab"
T0=$(date +%s)
left() { echo $((CAP - ($(date +%s) - T0))); }

run() {  # run LABEL GPU ROUNDS RUN_TIMEOUT NAME [ARGS...]: one `gpu ab`, in the background
  local label="$1" gpu="$2" rounds="$3" each="$4"
  shift 4
  local cmd="CUDA_VISIBLE_DEVICES=$gpu OUT=$R BENCH_TIMEOUT=$each $GPU ab --rounds $rounds $OLD $NEW $*"
  if [ "$DRY" = 1 ]; then echo "$cmd"; return; fi
  (CUDA_VISIBLE_DEVICES="$gpu" OUT="$R" BENCH_TIMEOUT="$each" \
     timeout -k 5 $(($(left) - 10)) $GPU ab --rounds "$rounds" "$OLD" "$NEW" "$@" \
     >"$R/$label.txt" 2>&1
   echo "== $label: exit $? after $(($(date +%s) - T0)) s") &
}

if [ "$DRY" = 0 ]; then
  mkdir -p "$R"
  if [ ! -f "$OLD/env.sh" ] && [ "${AB_BUILD_OLD:-0}" = 1 ]; then
    echo "== building the old site $OLD from .gpu/base.tar.gz"
    timeout -k 5 $(($(left) - 120)) $GPU setup --tree "$HERE/.gpu/base.tar.gz" --site "$OLD" \
      >"$R/setup_old.log" 2>&1 || { echo "old site build failed: $R/setup_old.log"; exit 3; }
  fi
  for site in "$OLD" "$NEW"; do
    [ -f "$site/env.sh" ] || { echo "no $site/env.sh: run gpu setup (see this script's header)"; exit 3; }
  done
fi

# Each run is a fresh process (imports, compiles); a run past its timeout
# is cut and its column stays empty.
run miss "$GPU_A" "${AB_MISS_ROUNDS:-3}" 60 torch_launch miss
run overhead "$GPU_B" "${AB_OVERHEAD_ROUNDS:-2}" 80 overhead --paths cutecall,handwritten \
  --no-bandwidth --no-cmdbuf-off --budget-s 20
run launch "$GPU_C" "${AB_LAUNCH_ROUNDS:-2}" 80 torch_launch --trials 3 --launches 10000
[ "$DRY" = 1 ] && exit 0
wait
for label in miss overhead launch; do
  echo "==================== $label ($R/$label.txt)"
  sed -n '/A\/B: /,$p' "$R/$label.txt" | tail -n 30
done
echo "== total $(($(date +%s) - T0)) s (cap $CAP s)"
