#!/usr/bin/env bash
# compute-sanitizer memcheck over the GPU tests (device machine, after
# setup.sh). Every process pytest starts is checked (--target-processes all).
# JAX and torch allocate each buffer with its own cudaMalloc (sanitizer.sh).
# The tests that fault on purpose are left out: their errors are the point
# (tests/driver/test_launch_blocking.py's out-of-bounds kernel, and
# tests/torch/test_gpu_torch.py's invalid launch configuration).
# The thread tests make 20 calls per thread instead of 200, and the test of
# first calls from many threads at once uses 4 threads, not 16, unless
# CUTECALL_TEST_FIRST_CALL_THREADS says otherwise.
# The summary separates memory-access errors (the point of memcheck) from
# CUDA API calls that returned an error, counted by call.
#   MEMCHECK_TESTS="tests/driver tests/jax" bash tools/gpu/memcheck.sh
# Several may run at once on one GPU, each with its own OUT and, as a
# precaution, its own MEMCHECK_PORT (the sanitizer's --port, for its link
# with the target; used only if this sanitizer lists the option).
# MEMCHECK_K selects tests (pytest -k).
# A test running past MEMCHECK_HANG_S seconds gets every thread's Python
# stack dumped into the pytest log (pytest's faulthandler_timeout).
# Writes $OUT/memcheck.log (the sanitizer's report, every process) and
# $OUT/memcheck_pytest.log; prints the error summary lines.
set -uo pipefail
OUT="${OUT:-/tmp/cutecall_out}"; mkdir -p "$OUT"
. "$(dirname "${BASH_SOURCE[0]}")/sanitizer.sh"
echo "XLA_FLAGS=${XLA_FLAGS:-}"
port=()
if [ -n "${MEMCHECK_PORT:-}" ]; then
  "$SAN" --help | grep -q -- '--port' && port=(--port "$MEMCHECK_PORT") \
    || echo "this compute-sanitizer has no --port option"
fi
# Does the sanitizer follow child processes (the bundle tests start some)?
# A parent and a child that each make a context and allocate: two
# summaries expected. (A process that only calls cuInit may leave none.)
"$SAN" --tool memcheck --target-processes all "${port[@]}" --log-file "$OUT/probe.%p.log" python3 -c '
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
subprocess.run([sys.executable, "-c", use], check=True)' > "$OUT/probe.out" 2>&1
probe_rc=$?
echo "child processes followed: $(cat "$OUT"/probe.*.log 2>/dev/null | grep -c 'ERROR SUMMARY') of 2 processes left a summary (probe exit $probe_rc)"
cat "$OUT"/probe.*.log > "$OUT/probe.log" 2>/dev/null; rm -f "$OUT"/probe.*[0-9].log
export CUTECALL_TEST_THREAD_CALLS=20
export CUTECALL_TEST_FIRST_CALL_THREADS="${CUTECALL_TEST_FIRST_CALL_THREADS:-4}"
timeout "${MEMCHECK_TIMEOUT:-560}" "${MEMCHECK[@]}" --target-processes all "${port[@]}" \
  --log-file "$OUT/memcheck.%p.log" \
  python3 -m pytest ${MEMCHECK_TESTS:-tests} -m gpu -v -rfs -p no:cacheprovider -o faulthandler_timeout="${MEMCHECK_HANG_S:-0}" \
    --deselect tests/driver/test_launch_blocking.py::test_an_out_of_bounds_write_raises_naming_its_kernel \
    --deselect tests/torch/test_gpu_torch.py::test_failing_launch_is_an_error_with_kernel_name \
    ${MEMCHECK_K:+-k "$MEMCHECK_K"} > "$OUT/memcheck_pytest.log" 2>&1
rc=$?
cat "$OUT"/memcheck.*.log > "$OUT/memcheck.log" 2>/dev/null; rm -f "$OUT"/memcheck.*[0-9].log
echo "pytest under memcheck: exit $rc"; tail -5 "$OUT/memcheck_pytest.log"
echo "processes checked: $(grep -c 'ERROR SUMMARY' "$OUT/memcheck.log")"
grep "ERROR SUMMARY" "$OUT/memcheck.log" | sort | uniq -c
echo "memory-access errors: $(grep -cE "$MEMORY_ERRORS" "$OUT/memcheck.log")"
echo "CUDA API calls that returned an error, by call:"
grep -oE 'on CUDA API call to [A-Za-z_0-9]+' "$OUT/memcheck.log" | sort | uniq -c
exit $rc
