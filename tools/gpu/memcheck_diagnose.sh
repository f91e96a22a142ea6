#!/usr/bin/env bash
# What the two memcheck runs that did not finish come with (device machine,
# after setup.sh; bench/results/2026-11-23-h100-memcheck.md):
# - attention cases 4 and 5: the sanitizer died of SIGSEGV when XLA's
#   reference attention followed cutecall's FA4 program in one process,
#   though each program alone ran clean. Runs the programs in both orders,
#   two XLA programs without cutecall, and cutecall's then a tiny one, with
#   Python's fault handler on (a crash in the target prints its Python
#   stack; a crash of the sanitizer's own front end prints none). Then the
#   test's sequence without the sanitizer, under glibc's heap checks.
# - the JAX 16-thread test stalled: 16 threads into plain `jnp` (no
#   cutecall), then into cutecall's function with 16 and 8 threads, each
#   making its arrays itself (THREAD_RUNS: fn-threads-where, for example
#   "jnp-16-main cutecall-16-main" has the main thread make them). A run
#   still going after STALL_S seconds gets its native stacks (gdb, where
#   the machine has it) and, at HANG_S, its Python stacks.
#
#   bash tools/gpu/memcheck_diagnose.sh          # attn threads
#   bash tools/gpu/memcheck_diagnose.sh threads
#
# Writes $OUT/diagnose/<run>.log; prints one line per run.
set -uo pipefail
OUT="${OUT:-/tmp/cutecall_out}/diagnose"; mkdir -p "$OUT"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/sanitizer.sh"
export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer="
HANG_S="${HANG_S:-60}"; STALL_S="${STALL_S:-45}"
start=$SECONDS

report() {  # name rc log
  echo "$1: exit $2 | $(grep -hE '^ +[0-9.]+ s  ' "$3" | tail -1 | sed 's/^ *//')" \
       "| $(grep -h 'ERROR SUMMARY' "$3" | sed 's/=* *//')" \
       "| memory-access errors: $(grep -cE "$MEMORY_ERRORS" "$3")" \
       "| target's fatal error: $(grep -hm1 'Fatal Python error' "$3" || echo none)" \
       "[$((SECONDS - start)) s]"
}

native_stacks() {  # log: gdb's backtrace of every thread of the Python target
  command -v gdb >/dev/null || { echo "(no gdb here for native stacks)" >> "$1"; return; }
  local pid; pid="$(pgrep -f '^python3 .*tools/gpu/(jax_threads|attn_case)[.]py' | head -1)"
  [ -n "$pid" ] && gdb -p "$pid" -batch -ex "thread apply all bt 16" > "$1.native" 2>&1
}

run() {  # name timeout command...
  local name="$1" limit="$2"; shift 2
  local log="$OUT/$name.log"
  timeout "$limit" "$@" > "$log" 2>&1 &
  local job=$!
  ( sleep "$STALL_S"; kill -0 "$job" 2>/dev/null && native_stacks "$log" ) &
  local watcher=$!
  wait "$job"; local rc=$?
  kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
  report "$name" "$rc" "$log"
}

attn() {
  for order in ours,xla32 xla32,ours xla32,xla ours,tiny; do
    run "case5-$order" 150 "${MEMCHECK[@]}" python3 "$here/attn_case.py" --case 5 --path "$order"
  done
  local debug; debug="$(ls /usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0 2>/dev/null)"
  for c in 4 5; do  # no sanitizer: glibc checks the heap on every call
    LD_PRELOAD="$debug" MALLOC_CHECK_=3 MALLOC_PERTURB_=165 \
      run "case$c-all-heapcheck" 150 python3 "$here/attn_case.py" --case "$c" --path all
  done
  [ -n "$debug" ] || echo "(no libc_malloc_debug.so.0: MALLOC_CHECK_ had no effect)"
}

threads() {
  for spec in ${THREAD_RUNS:-jnp-16-thread cutecall-16-thread cutecall-8-thread}; do
    IFS=- read -r fn n inputs <<< "$spec"
    run "threads-$spec" $((HANG_S + 20)) "${MEMCHECK[@]}" python3 "$here/jax_threads.py" \
      --fn "$fn" --threads "$n" --inputs "$inputs" --calls 20 --hang-s "$HANG_S"
  done
}

for what in ${@:-attn threads}; do "$what"; done
