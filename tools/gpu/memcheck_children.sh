#!/usr/bin/env bash
# The child processes of the GPU bundle tests (fresh interpreters that load
# a bundle or a jax.export artifact, with the CuTe DSL blocked) under
# compute-sanitizer memcheck, each child on its own (device machine, after
# setup.sh). pytest itself runs outside the sanitizer here: its own
# launches are checked by memcheck.sh's "core" part. This covers the case
# where the sanitizer does not follow a process's children.
#
#   bash tools/gpu/memcheck_children.sh     # writes $OUT/children/
set -uo pipefail
OUT="${OUT:-/tmp/cutecall_out}/children"; mkdir -p "$OUT"
. "$(dirname "${BASH_SOURCE[0]}")/sanitizer.sh"
export CUTECALL_TEST_CHILD_WRAPPER="${MEMCHECK[*]} --port ${MEMCHECK_PORT:-60000} --log-file $OUT/child.%p.log"
timeout "${MEMCHECK_TIMEOUT:-400}" python3 -m pytest tests/bundle -m gpu -v -rfs -p no:cacheprovider \
  > "$OUT/pytest.log" 2>&1
rc=$?
cat "$OUT"/child.*.log > "$OUT/memcheck.log" 2>/dev/null
echo "pytest with sanitized children: exit $rc"; tail -3 "$OUT/pytest.log"
echo "child processes checked: $(grep -c 'ERROR SUMMARY' "$OUT/memcheck.log")"
grep "ERROR SUMMARY" "$OUT/memcheck.log" | sort | uniq -c
echo "memory-access errors: $(grep -cE "$MEMORY_ERRORS" "$OUT/memcheck.log")"
exit $rc
