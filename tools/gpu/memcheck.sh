# shellcheck shell=bash
# `gpu memcheck [PART... | TEST PATH...]` and `gpu sanitize COMMAND...`,
# sourced by tools/gpu/gpu (run directly, it forwards there): the GPU tests
# under compute-sanitizer memcheck, after `gpu setup`. Results and what they
# showed: tools/records/memcheck.md.
#
#   bash tools/gpu/gpu memcheck                      # every test part, at once
#   bash tools/gpu/gpu memcheck fa4 attn threads
#   MEMCHECK_SERIAL=1 bash tools/gpu/gpu memcheck quackjax attn
#   bash tools/gpu/gpu memcheck children attn-cases
#   MEMCHECK_K=vmap bash tools/gpu/gpu memcheck tests/jax   # part "custom"
#
# Every sanitized run: memcheck without a leak report, at most 50 errors
# printed. JAX and torch allocate each buffer with its own cudaMalloc, so an
# access past a buffer's end is past an allocation, which memcheck sees (a
# pooling allocator would hide it inside the pool). Output unbuffered, and a
# crash in a Python target prints its Python stack (sanitizer_env).
#
# A test part (pytest under one sanitizer, memcheck_pytest) follows every
# process pytest starts (--target-processes all), leaves out the two tests
# that fault on purpose (their errors are the point), makes 20 calls per
# thread instead of 200 in the thread tests and 4 threads in the first-calls
# test (CUTECALL_TEST_FIRST_CALL_THREADS), dumps every thread's Python stack
# into the pytest log when a test runs past MEMCHECK_HANG_S (240) seconds,
# and is cut off after MEMCHECK_TIMEOUT (560) seconds.
#
# Parts run at once on the one GPU, each with its own OUT folder and its own
# sanitizer port (a precaution), or one after another with MEMCHECK_SERIAL=1:
# four or five sanitizers at once have made one of them die of SIGSEGV, or
# stall in XLA's compile, in tests that pass under a sanitizer of their own.
# XLA's autotuning is off in every part (--xla_gpu_autotune_level=0): under
# the sanitizer each candidate GEMM it tries is instrumented and run, which
# slows compiles for XLA's reference computations; cutecall's kernels are the
# same either way. XLA's command buffers are off in the parts that hold FA4's
# backward, in the JAX thread tests and in attn-cases: with them on, the
# sanitizer itself died of SIGSEGV while XLA compiled a program holding FA4's
# backward, though the same test passes with 0 errors with them off and from
# the torch path. A kernel's memory accesses are the same inside a CUDA graph
# or not; the tests that run these programs with command buffers on run
# outside the sanitizer.
#
# Special parts: "children" runs the GPU bundle tests outside the sanitizer
# and each child process they start (fresh interpreters loading a bundle or
# a jax.export artifact, the DSL blocked) under its own sanitizer, through
# CUTECALL_TEST_CHILD_WRAPPER (tests/shared.py::run_python): the sanitizer
# does not leave a summary for a child started by subprocess (the probe in
# every test part shows it). "attn-cases" runs attention cases of
# tests/attention/test_gpu_flash_attention.py one process per case and path
# (tools/gpu/probes.py attn-case; ATTN_CASES "4 5", ATTN_PATHS "xla32 all",
# MEMCHECK_TIMEOUT 150 s per run), to tell which computation a sanitizer
# crash comes with.
#
# Writes $OUT/<part>/ and $OUT/<part>.summary; prints one line per part.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  # shellcheck disable=SC2086  # MEMCHECK_TESTS: test paths split on spaces
  exec bash "$(dirname "$0")/gpu" memcheck ${MEMCHECK_TESTS:-} "$@"
fi

# Memory-access errors in a sanitizer log, by the report's first line:
MEMORY_ERRORS='^========= (Invalid|Out-of-range|Misaligned|Malloc|Hardware exception)'
declare -A MEMCHECK_PARTS=(
  [core]="tests/driver tests/bundle tests/compat tests/examples"
  [torch]="tests/torch"
  [jax]="tests/jax"
  [quack]="tests/quack/test_gpu_quack_gemm.py tests/external/test_gpu_quack.py"
  [quackjax]="tests/quack/test_gpu_quack_jax.py"
  [fa4]="tests/external/test_gpu_fa4.py"
  [attn]="tests/attention/test_gpu_flash_attention.py"
  [threads]="tests/test_gpu_threads.py::test_a_torch_launch_object_from_16_threads_on_their_own_streams tests/test_gpu_threads.py::test_a_jitted_cutecall_kernel_from_16_threads"
  [firstcalls]="tests/test_gpu_threads.py::test_first_calls_from_many_threads_at_once_trace_compile_and_run"
  [warmup]="tests/test_warmup.py"
)
MEMCHECK_ORDER=(fa4 attn quack core jax torch quackjax threads firstcalls warmup)  # slowest first
MEMCHECK_SPECIAL=(children attn-cases)
NO_COMMAND_BUFFERS=" fa4 attn threads firstcalls attn-cases "

# The site's environment, SAN (the compute-sanitizer), MEMCHECK (its memcheck
# command), and the environment of every sanitized run.
sanitizer_env() {
  use_site
  export PATH="$PATH:/usr/local/cuda/bin"
  SAN="$(command -v compute-sanitizer || find /usr/local/cuda*/compute-sanitizer -maxdepth 1 -name compute-sanitizer 2>/dev/null | head -1)"
  [ -n "$SAN" ] || { echo "compute-sanitizer not found"; exit 2; }
  "$SAN" --version | tail -1
  MEMCHECK=("$SAN" --tool memcheck --leak-check no --print-limit 50)
  export XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_PYTHON_CLIENT_PREALLOCATE=false
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
}

# PORT: (--port MEMCHECK_PORT) where set and this sanitizer lists the option.
port_args() {
  PORT=()
  if [ -n "${MEMCHECK_PORT:-}" ]; then
    if "$SAN" --help | grep -q -- '--port'; then PORT=(--port "$MEMCHECK_PORT")
    else echo "this compute-sanitizer has no --port option"; fi
  fi
}

error_summary() {  # LOG [what]: processes, summaries, memory-access errors, API errors
  echo "${2:-processes} checked: $(grep -c 'ERROR SUMMARY' "$1")"
  grep "ERROR SUMMARY" "$1" | sort | uniq -c
  echo "memory-access errors: $(grep -cE "$MEMORY_ERRORS" "$1")"
  echo "CUDA API calls that returned an error, by call:"
  grep -oE 'on CUDA API call to [A-Za-z_0-9]+' "$1" | sort | uniq -c
}

pytest_result() {  # LOG RC: pytest's last summary line, else the exit status
  local r
  r="$(grep -hE '^=+ .* in [0-9.]+s' "$1" 2>/dev/null | tail -1 | sed -E 's/=//g; s/ in [0-9.]+s.*//; s/^ +//')"
  echo "result: ${r:-exit $2}"
}

# Does the sanitizer follow child processes? A parent and a child that each
# make a context and allocate: two summaries expected. (A process that only
# calls cuInit may leave none.)
follow_probe() {  # DIR
  "$SAN" --tool memcheck --target-processes all "${PORT[@]}" --log-file "$1/probe.%p.log" "$PY" -c '
import subprocess, sys
use = """
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
for status in (cu.cuInit(0), cu.cuDeviceGet(ctypes.byref(dev), 0),
               cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
               cu.cuCtxSetCurrent(ctx), cu.cuMemAlloc_v2(ctypes.byref(ptr), 256),
               cu.cuMemFree_v2(ptr)):
    if status:
        raise SystemExit(f"CUDA driver call failed: {status}")
"""
exec(use)
subprocess.run([sys.executable, "-c", use], check=True)' >"$1/probe.out" 2>&1
  local rc=$?
  echo "child processes followed: $(cat "$1"/probe.*.log 2>/dev/null | grep -c 'ERROR SUMMARY') of 2 processes left a summary (probe exit $rc)"
  cat "$1"/probe.*.log >"$1/probe.log" 2>/dev/null; rm -f "$1"/probe.*[0-9].log
}

memcheck_pytest() {  # DIR TESTS: pytest -m gpu TESTS under one sanitizer
  local dir="$1" tests="$2" rc
  echo "XLA_FLAGS=${XLA_FLAGS:-}"
  port_args
  follow_probe "$dir"
  export CUTECALL_TEST_THREAD_CALLS=20
  export CUTECALL_TEST_FIRST_CALL_THREADS="${CUTECALL_TEST_FIRST_CALL_THREADS:-4}"
  # shellcheck disable=SC2086  # $tests: test paths split on spaces
  timeout "${MEMCHECK_TIMEOUT:-560}" "${MEMCHECK[@]}" --target-processes all "${PORT[@]}" \
    --log-file "$dir/memcheck.%p.log" \
    "$PY" -m pytest $tests -m gpu -v -rfs -p no:cacheprovider -o faulthandler_timeout="${MEMCHECK_HANG_S:-240}" \
      --deselect tests/driver/test_launch_blocking.py::test_an_out_of_bounds_write_raises_naming_its_kernel \
      --deselect tests/torch/test_gpu_torch.py::test_failing_launch_is_an_error_with_kernel_name \
      ${MEMCHECK_K:+-k "$MEMCHECK_K"} >"$dir/memcheck_pytest.log" 2>&1
  rc=$?
  cat "$dir"/memcheck.*.log >"$dir/memcheck.log" 2>/dev/null; rm -f "$dir"/memcheck.*[0-9].log
  echo "pytest under memcheck: exit $rc"; tail -5 "$dir/memcheck_pytest.log"
  error_summary "$dir/memcheck.log"
  pytest_result "$dir/memcheck_pytest.log" $rc
  return $rc
}

memcheck_children() {  # DIR: the bundle tests' children, each under its own sanitizer
  local dir="$1" rc
  export CUTECALL_TEST_CHILD_WRAPPER="${MEMCHECK[*]} --port ${MEMCHECK_PORT:-60000} --log-file $dir/child.%p.log"
  timeout "${MEMCHECK_TIMEOUT:-400}" "$PY" -m pytest tests/bundle -m gpu -v -rfs -p no:cacheprovider \
    >"$dir/pytest.log" 2>&1
  rc=$?
  cat "$dir"/child.*.log >"$dir/memcheck.log" 2>/dev/null
  echo "pytest with sanitized children: exit $rc"; tail -3 "$dir/pytest.log"
  error_summary "$dir/memcheck.log" "child processes"
  pytest_result "$dir/pytest.log" $rc
  return $rc
}

memcheck_attn_cases() {  # DIR: attention cases, one process per case and path
  local dir="$1" c p log rc ok=0 runs=0 start=$SECONDS
  for c in ${ATTN_CASES:-4 5}; do
    for p in ${ATTN_PATHS:-xla32 all}; do
      log="$dir/case$c-$p.log"
      timeout "${MEMCHECK_TIMEOUT:-150}" "${MEMCHECK[@]}" \
        "$PY" "$GPU_TOOLS/probes.py" attn-case --case "$c" --path "$p" >"$log" 2>&1
      rc=$?
      runs=$((runs + 1)); [ $rc -ne 0 ] || ok=$((ok + 1))
      echo "case $c $p: exit $rc | $(grep -h ' s  ' "$log" | tail -1 | sed 's/^ *//')" \
        "| $(grep -h 'ERROR SUMMARY' "$log" | sed 's/=* *//') | memory-access errors:" \
        "$(grep -cE "$MEMORY_ERRORS" "$log") [$((SECONDS - start)) s]"
    done
  done
  cat "$dir"/case*.log >"$dir/memcheck.log" 2>/dev/null
  error_summary "$dir/memcheck.log"
  echo "result: $ok of $runs runs exit 0"
}

memcheck_part() {  # PART: one part, in its own folder, its flags set
  local p="$1" dir="$OUT/$1"
  mkdir -p "$dir"
  case "$p" in
    children) memcheck_children "$dir" ;;
    attn-cases) memcheck_attn_cases "$dir" ;;
    custom) memcheck_pytest "$dir" "${MEMCHECK_CUSTOM[*]}" ;;
    *) memcheck_pytest "$dir" "${MEMCHECK_PARTS[$p]}" ;;
  esac
}

cmd_memcheck() {
  local parts=() p port=50000 flags
  MEMCHECK_CUSTOM=()
  for p in "$@"; do
    case "$p" in tests*) MEMCHECK_CUSTOM+=("$p") ;; *) parts+=("$p") ;; esac
  done
  [ ${#MEMCHECK_CUSTOM[@]} -eq 0 ] || parts+=(custom)
  [ ${#parts[@]} -gt 0 ] || parts=("${MEMCHECK_ORDER[@]}")
  for p in "${parts[@]}"; do
    [ -n "${MEMCHECK_PARTS[$p]:-}" ] || [[ " ${MEMCHECK_SPECIAL[*]} custom " == *" $p "* ]] ||
      die "no part '$p' (parts: ${MEMCHECK_ORDER[*]} ${MEMCHECK_SPECIAL[*]}; or test paths)"
  done
  sanitizer_env
  for p in "${parts[@]}"; do
    flags="${XLA_FLAGS:-} --xla_gpu_autotune_level=0"
    [[ "$NO_COMMAND_BUFFERS" == *" $p "* ]] && flags="$flags --xla_gpu_enable_command_buffer="
    [ "$p" = children ] && flags="${XLA_FLAGS:-}"  # pytest runs outside the sanitizer there
    (MEMCHECK_PORT=$port XLA_FLAGS="$flags" memcheck_part "$p" >"$OUT/$p.summary" 2>&1) &
    port=$((port + 1000))
    if [ -n "${MEMCHECK_SERIAL:-}" ]; then wait; else sleep 2; fi  # sanitizers start one by one
  done
  wait

  printf '%-10s %-28s %-9s %-14s %s\n' part result processes memory-errors "API errors"
  for p in "${parts[@]}"; do
    local s="$OUT/$p.summary"
    printf '%-10s %-28s %-9s %-14s %s\n' "$p" "$(sed -n 's/^result: //p' "$s" | tail -1)" \
      "$(sed -n 's/^\(child \)\{0,1\}processes checked: //p' "$s")" "$(sed -n 's/^memory-access errors: //p' "$s" | tail -1)" \
      "$(sed -n '/^CUDA API calls/,/^result: /p' "$s" | sed '1d;$d' | tr -s ' ' | paste -sd';' -)"
  done
}

cmd_sanitize() {  # COMMAND...: under memcheck, the environment of every part
  [ $# -ge 1 ] || die "usage: gpu sanitize COMMAND [ARGS...]"
  local dir="$OUT/sanitize" log rc
  mkdir -p "$dir"
  log="$(free_name "$dir/run" log)"
  sanitizer_env
  port_args
  echo "XLA_FLAGS=${XLA_FLAGS:-}; log: $log"
  timeout "${MEMCHECK_TIMEOUT:-560}" "${MEMCHECK[@]}" "${PORT[@]}" "$@" >"$log" 2>&1
  rc=$?
  tail -n 25 "$log"
  echo "exit $rc"
  error_summary "$log"
  return $rc
}
