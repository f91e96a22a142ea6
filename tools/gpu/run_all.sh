#!/usr/bin/env bash
# Device call 2 (after stage1.sh): install, build, then every GPU check of the
# foundation issue in one call. Logs and results land in $OUT.
#   run(command="bash tools/gpu/run_all.sh", carry=[".whl/part2"])
# Steps: RUN_STEPS="tests external demo torch vmap warm cpp doctor bench
# xbench" (default: tests demo bench; tests = tests/ but tests/external,
# external = tests/external (QuACK, FA4), torch = bench/torch_launch, vmap =
# bench/vmap, warm = bench/warm_start, cpp = tools/gpu/cpp_example.sh, xbench
# = bench/external); PYTEST_ARGS adds pytest arguments (e.g. "-k gpu");
# BENCH_ARGS adds arguments to bench/overhead/run.py (e.g. "--trials 31").
set -uo pipefail
OUT="${OUT:-/tmp/cutecall_out}"; mkdir -p "$OUT"
steps="${RUN_STEPS:-tests demo bench}"
bash tools/gpu/setup.sh > "$OUT/setup.log" 2>&1 || { tail -40 "$OUT/setup.log"; exit 1; }
tail -15 "$OUT/setup.log"
. /tmp/site/env.sh
export PYTHONUNBUFFERED=1
rc=0
if [[ " $steps " == *" tests "* ]]; then
  echo "== pytest (GPU tests included)"
  timeout "${TESTS_TIMEOUT:-420}" python3 -m pytest tests -q -rfs --maxfail=40 \
    --ignore=tests/external ${PYTEST_ARGS:-} --junitxml="$OUT/pytest.xml" > "$OUT/pytest.log" 2>&1 || rc=1
  tail -40 "$OUT/pytest.log"
fi
if [[ " $steps " == *" external "* ]]; then
  echo "== pytest tests/external (QuACK, FA4)"
  timeout "${EXTERNAL_TIMEOUT:-480}" python3 -m pytest tests/external -q -rfs --maxfail=40 \
    ${PYTEST_ARGS:-} --junitxml="$OUT/external.xml" > "$OUT/external.log" 2>&1 || rc=1
  tail -40 "$OUT/external.log"
fi
if [[ " $steps " == *" demo "* ]]; then
  echo "== make demo equivalent"
  timeout 120 python3 -m cutecall.demo 2>&1 | tee "$OUT/demo.log" | tail -12 || rc=1
fi
if [[ " $steps " == *" torch "* ]]; then
  echo "== bench/torch_launch"
  timeout 300 python3 bench/torch_launch/run.py --out "$OUT/torch_launch.json" > "$OUT/torch_bench.log" 2>&1 || rc=1
  tail -20 "$OUT/torch_bench.log"
fi
if [[ " $steps " == *" vmap "* ]]; then
  echo "== bench/vmap"
  timeout 300 python3 bench/vmap/run.py --out "$OUT/vmap.json" > "$OUT/vmap.log" 2>&1 || rc=1
  tail -20 "$OUT/vmap.log"
fi
if [[ " $steps " == *" warm "* ]]; then
  echo "== bench/warm_start"
  timeout 400 python3 bench/warm_start/run.py --out "$OUT/warm_start.json" > "$OUT/warm_start.log" 2>&1 || rc=1
  tail -25 "$OUT/warm_start.log"
fi
if [[ " $steps " == *" cpp "* ]]; then
  echo "== C++ example (tools/gpu/cpp_example.sh)"
  timeout 300 bash tools/gpu/cpp_example.sh > "$OUT/cpp_example.log" 2>&1 || rc=1
  tail -30 "$OUT/cpp_example.log"
fi
if [[ " $steps " == *" doctor "* ]]; then
  echo "== cutecall doctor"
  (cd / && timeout 120 python3 -m cutecall doctor) 2>&1 | tee "$OUT/doctor.log" | tail -30 || rc=1
fi
if [[ " $steps " == *" xbench "* ]]; then
  echo "== bench/external"
  timeout "${XBENCH_TIMEOUT:-480}" python3 bench/external/run.py --out "$OUT/external.json" ${XBENCH_ARGS:-} > "$OUT/xbench.log" 2>&1 || rc=1
  tail -30 "$OUT/xbench.log"
fi
if [[ " $steps " == *" bench "* ]]; then
  echo "== bench/overhead"
  timeout 500 python3 bench/overhead/run.py --out "$OUT/overhead.json" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1 || rc=1
  tail -45 "$OUT/bench.log"
fi
exit $rc
