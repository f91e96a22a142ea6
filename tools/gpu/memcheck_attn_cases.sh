#!/usr/bin/env bash
# Cases of tests/external/test_gpu_flash_attention.py under compute-sanitizer
# memcheck, one process per case and path (tools/gpu/attn_case.py), to tell
# which computation a sanitizer crash in that test comes with (device
# machine, after setup.sh). XLA's command buffers and autotuning are off, as
# in memcheck_parts.sh's attn part.
#
#   bash tools/gpu/memcheck_attn_cases.sh                  # cases 4 5; xla32 all
#   ATTN_PATHS="ours xla fa4" bash tools/gpu/memcheck_attn_cases.sh 1 4
#
# Writes $OUT/attn_cases/case<N>-<path>.log; prints one line per run: exit
# status, the last step reached, the sanitizer's summary.
set -uo pipefail
OUT="${OUT:-/tmp/cutecall_out}/attn_cases"; mkdir -p "$OUT"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/sanitizer.sh"
export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer="
cases=("$@"); [ ${#cases[@]} -gt 0 ] || cases=(4 5)
start=$SECONDS
for c in "${cases[@]}"; do
  for p in ${ATTN_PATHS:-xla32 all}; do
    log="$OUT/case$c-$p.log"
    timeout "${MEMCHECK_TIMEOUT:-150}" "${MEMCHECK[@]}" \
      python3 "$here/attn_case.py" --case "$c" --path "$p" > "$log" 2>&1
    rc=$?
    echo "case $c $p: exit $rc | $(grep -h ' s  ' "$log" | tail -1 | sed 's/^ *//')" \
         "| $(grep -h 'ERROR SUMMARY' "$log" | sed 's/=* *//') | memory-access errors:" \
         "$(grep -cE "$MEMORY_ERRORS" "$log") [$((SECONDS - start)) s]"
  done
done
