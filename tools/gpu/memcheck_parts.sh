#!/usr/bin/env bash
# The GPU suite under compute-sanitizer memcheck, in named parts (device
# machine, after setup.sh). Each part is one tools/gpu/memcheck.sh run with
# its own OUT folder and its own sanitizer port. The parts run at once on
# the one GPU, or one after another with MEMCHECK_SERIAL=1: four or five
# sanitizers at once have made one of them die of SIGSEGV, or stall in
# XLA's compile, in tests that pass under a sanitizer of their own
# (bench/results/2026-11-23-h100-memcheck.md, night session).
#
#   bash tools/gpu/memcheck_parts.sh               # every part
#   bash tools/gpu/memcheck_parts.sh fa4 attn threads
#   MEMCHECK_SERIAL=1 bash tools/gpu/memcheck_parts.sh quackjax attn
#
# XLA's command buffers are off in the parts that hold FA4's backward and in
# the JAX thread tests: with them on, the sanitizer itself died of SIGSEGV
# while XLA compiled a program holding FA4's backward, though the same test
# passes with 0 errors with them off and from the torch path
# (bench/results/2026-11-23-h100-memcheck.md). A kernel's memory accesses
# are the same inside a CUDA graph or not; the tests that run these
# programs with command buffers on run outside the sanitizer.
#
# XLA's autotuning is off in every part (--xla_gpu_autotune_level=0): under
# the sanitizer each candidate GEMM it tries is instrumented and run, which
# slows compiles for XLA's reference computations; cutecall's kernels are
# the same either way.
#
# Writes $OUT/<part>/ (memcheck.sh's logs) and $OUT/<part>.summary, then
# prints one line per part. MEMCHECK_TIMEOUT (s) bounds each part.
set -uo pipefail
OUT="${OUT:-/tmp/cutecall_out}"; mkdir -p "$OUT"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

declare -A TESTS=(
  [core]="tests/driver tests/bundle tests/compat tests/examples"
  [torch]="tests/torch"
  [jax]="tests/jax"
  [quack]="tests/external/test_gpu_quack_gemm.py tests/external/test_gpu_quack.py"
  [quackjax]="tests/external/test_gpu_quack_jax.py"
  [fa4]="tests/external/test_gpu_fa4.py"
  [attn]="tests/external/test_gpu_flash_attention.py"
  [threads]="tests/test_gpu_threads.py::test_a_torch_launch_object_from_16_threads_on_their_own_streams tests/test_gpu_threads.py::test_a_jitted_cutecall_kernel_from_16_threads"
  [firstcalls]="tests/test_gpu_threads.py::test_first_calls_from_many_threads_at_once_trace_compile_and_run"
  [warmup]="tests/test_warmup.py"
)
NO_COMMAND_BUFFERS=" fa4 attn threads firstcalls "
ORDER=(fa4 attn quack core jax torch quackjax threads firstcalls warmup)  # slowest first

parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=("${ORDER[@]}")
for p in "${parts[@]}"; do
  [ -n "${TESTS[$p]:-}" ] || { echo "no part '$p' (parts: ${ORDER[*]})"; exit 2; }
done

port=50000
for p in "${parts[@]}"; do
  flags="${XLA_FLAGS:-} --xla_gpu_autotune_level=0"
  [[ "$NO_COMMAND_BUFFERS" == *" $p "* ]] && flags="$flags --xla_gpu_enable_command_buffer="
  ( OUT="$OUT/$p" MEMCHECK_PORT=$port MEMCHECK_TESTS="${TESTS[$p]}" XLA_FLAGS="$flags" \
      MEMCHECK_HANG_S="${MEMCHECK_HANG_S:-240}" bash "$here/memcheck.sh" > "$OUT/$p.summary" 2>&1 ) &
  port=$((port + 1000))
  if [ -n "${MEMCHECK_SERIAL:-}" ]; then wait; else sleep 2; fi  # sanitizers start one by one
done
wait

printf '%-9s %-28s %-9s %-14s %s\n' part pytest processes memory-errors "API errors"
for p in "${parts[@]}"; do
  s="$OUT/$p.summary"
  result="$(grep -hE '^=+ .* in [0-9.]+s' "$OUT/$p/memcheck_pytest.log" 2>/dev/null \
            | tail -1 | sed -E 's/=//g; s/ in [0-9.]+s.*//; s/^ +//')"
  printf '%-9s %-28s %-9s %-14s %s\n' "$p" "${result:-$(grep -o 'exit [0-9]*' "$s" | head -1)}" \
    "$(sed -n 's/^processes checked: //p' "$s")" "$(sed -n 's/^memory-access errors: //p' "$s")" \
    "$(sed -n '/^CUDA API calls/,$p' "$s" | tail -n +2 | tr -s ' ' | paste -sd';' -)"
done
