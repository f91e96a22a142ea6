#!/usr/bin/env bash
# Issue 37's kernel families on the GPU machine: bench/external/new_families.py,
# one process per family on ONE GPU (compiles at once, timing in turns under a
# lock), then the merged table. Run after `bash tools/gpu/gpu setup`:
#
#   CUDA_VISIBLE_DEVICES=0 bash bench/external/device_new_families.sh
#
# Writes $OUT/newfam/{<family>.json,<family>.log,newfam.json,newfam.md} and
# pytest.{log,xml} (the GPU tests of this round's fixes, run alongside).
# Hard wall-time cap: NEWFAM_CAP seconds (default 240) for everything.
# Environment: OUT (/tmp/cutecall_out), CUTECALL_SITE (/tmp/site), PYTHON
# (python3), NEWFAM_FAMILIES (all), NEWFAM_ARGS (extra new_families.py args).
# shellcheck source=bench/external/device_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/device_env.sh" newfam 240 "${NEWFAM_CAP:-}"

families="${NEWFAM_FAMILIES:-liger hadamard cutlass_operators cudnn_bsa fa4_varlen allgather fa4_block_sparsity}"

use_site
lock="$(mktemp /tmp/newfam.lock.XXXXXX)"
script="$repo/bench/external/new_families.py"
# Each family: the cap less 25 s for the merge; cases that would start
# after the budget are skipped, and each case's record is on disk as it ends.
work=$((cap - 25)) budget=$((cap - 45))
pids=()
# The GPU tests of this round's fixes, beside the families (small shapes: a
# few launches, no lock); NEWFAM_TESTS="" skips them.
tests="${NEWFAM_TESTS-tests/external/test_gpu_fa4_block_sparsity.py tests/jax/test_outputs_optional_none.py tests/external/test_gpu_quack_allgather.py}"
if [ -n "$tests" ]; then
  # shellcheck disable=SC2086  # a list of paths
  (cd "$repo" && timeout -k 5 "$work" "$py" -m pytest -q -rfs -p no:cacheprovider \
    --junitxml="$out/pytest.xml" $tests >"$out/pytest.log" 2>&1) &
  tpid=$!
fi
for fam in $families; do
  # shellcheck disable=SC2086  # NEWFAM_ARGS: words
  timeout -k 5 "$work" "$py" "$script" --family "$fam" --out "$out" --lock "$lock" \
    --budget "$budget" ${NEWFAM_ARGS:-} >"$out/$fam.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
rm -f "$lock"
if [ -n "$tests" ]; then
  wait "$tpid" || rc=1
  echo "== GPU tests ($tests):"; tail -n 5 "$out/pytest.log"
fi
echo "== families done after $((SECONDS - t0)) s (rc $rc); per family:"
for fam in $families; do
  printf -- '-- %s: ' "$fam"; grep -E '^(== |   [0-9N].* s \+ )' "$out/$fam.log" | tr '\n' ' ' | cut -c1-400; echo
  grep -q Traceback "$out/$fam.log" && grep -E '^[A-Za-z_.]+(Error|Exception)' "$out/$fam.log" | tail -n 3
done
timeout 20 "$py" "$script" --merge "$out" || rc=1
echo "== newfam: $((SECONDS - t0)) s, rc $rc; files in $out"
exit $rc
